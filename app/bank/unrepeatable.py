"""What in a question's code makes what it prints differ from one Python process to the next,
where two runs here cannot show it.

`verify` and the server prove a key by running the code twice and comparing, but both runs are
forks of one warm process: string hashes (so the order of a set of strings), object addresses
(`id()`, `data_ptr()`) and the pid (always 1 in the sandbox) are the same in both, and a coarse
random or timed value (a coin flip, a minute's parity) agrees often enough to pass. A learner's
own `python` gives something else. Lint warns about each, at the question's line; an unseeded
draw from Python's or NumPy's generator too, and the OS's randomness (`os.urandom`, `secrets`,
`uuid4`). torch's own generators are seeded from the OS in every run, as in a fresh process, and
the bank draws from them unseeded wherever only a dtype is printed: a draw is warned about only
where the code reads a value out of a tensor (`.item()`, `.tolist()`, `int()`, a comparison)
without `torch.manual_seed()`, as a coin flip does (one passed both runs 3 times in 8).
"""

from __future__ import annotations

import ast

_ADDRESSES = {
    "id": "an object's address changes with each Python process",
    "hash": "a string's hash changes with each Python process",
}
_CLOCKS = {
    "time",
    "time_ns",
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "process_time",
}
_SHOWN = {"print", "str", "repr", "list", "tuple", "enumerate", "iter", "next"}
_OS_RANDOMNESS = {"os.urandom", "os.getrandom", "uuid.uuid1", "uuid.uuid4", "random.SystemRandom"}
_TORCH_DRAWS = {"rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "normal", "poisson",
                "rand_like", "randn_like", "randint_like"}  # fmt: skip
_TORCH_DRAWS_IN_PLACE = {
    "uniform_",
    "normal_",
    "random_",
    "bernoulli_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "cauchy_",
}
_VALUE_READS = {"item", "tolist"}
_UNINITIALISED = {"torch.empty", "torch.empty_like", "torch.empty_strided"}
"""Tensors whose values are whatever memory held: warned about where the code prints anything."""


def unrepeatable(code: str) -> list[str]:
    """Why what `code` prints may differ in another Python process, one reason per kind."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []  # a run says what is wrong with it
    said: dict[str, None] = {}
    nodes = list(ast.walk(tree))  # walked once: lint reads every question of the bank
    names = _imported_names(nodes)
    calls = [(node, _full_name(node.func, names)) for node in nodes if isinstance(node, ast.Call)]
    seeded = {module for module in ("random", "numpy", "torch") if _seeds(calls, module)}
    sets = _set_names(nodes)
    for node, full in calls:
        said.update(dict.fromkeys(_call(node, full, seeded, sets)))
    if any(
        isinstance(node, (ast.For, ast.comprehension)) and _is_set(node.iter, sets)
        for node in nodes
    ):
        said["walks a set: the order of a set of strings changes with each Python process"] = None
    if _prints_uninitialised(nodes, calls):
        said[
            "prints a tensor made by torch.empty: its values are whatever memory held, another in every process"
        ] = None
    if "torch" not in seeded and (
        _draws_from_torch(calls) and _reads_a_value(nodes) or _prints_a_draw(calls)
    ):
        said[
            "reads a value drawn from torch's generator without torch.manual_seed(): a learner's run draws another"
        ] = None
    return list(said)


_METADATA = {"dtype", "shape", "device", "ndim", "layout", "requires_grad", "is_cuda"}


def _is_metadata(node: ast.expr) -> bool:
    """A tensor's dtype, shape or device, or a torch constant (`torch.float16`): what a comparison
    of the bank's draws reads, the same whatever was drawn."""
    if not isinstance(node, ast.Attribute):
        return False
    return node.attr in _METADATA or _dotted(node).startswith("torch.")


def _prints_uninitialised(nodes: list[ast.AST], calls: list[tuple[ast.Call, str]]) -> bool:
    """Whether the code prints a tensor `torch.empty` made, as it was made: passed to print (or
    str, list…) itself or through the name it was bound to, where nothing filled it (an in-place
    method such as `.uniform_()`, or `out=`). Its dtype or shape is the same in every process."""
    made = {id(node) for node, full in calls if full in _UNINITIALISED}
    empties = {target.id for node in nodes if isinstance(node, ast.Assign) and id(node.value) in made
               for target in node.targets if isinstance(target, ast.Name)}  # fmt: skip
    filled = {
        kw.value.id
        for node, _ in calls
        for kw in node.keywords
        if kw.arg == "out" and isinstance(kw.value, ast.Name)
    }
    filled |= {node.func.value.id for node, _ in calls if isinstance(node.func, ast.Attribute)
               and node.func.attr.endswith("_") and isinstance(node.func.value, ast.Name)}  # fmt: skip
    for node, full in calls:
        if full.rpartition(".")[2] in _SHOWN:
            for arg in node.args:
                if id(arg) in made or (isinstance(arg, ast.Name) and arg.id in empties - filled):
                    return True
    return False


def _set_names(nodes: list[ast.AST]) -> set[str]:
    """Names the code binds to a set (`names = {"a", "b"}`): printing one later prints the set."""
    return {target.id for node in nodes if isinstance(node, ast.Assign) and _is_set(node.value)
            for target in node.targets if isinstance(target, ast.Name)}  # fmt: skip


def _is_draw(full: str) -> bool:
    owner, _, name = full.rpartition(".")
    return (
        (owner in ("torch", "torch.random") and name in _TORCH_DRAWS)
        or name in _TORCH_DRAWS_IN_PLACE
        or "dropout" in name
    )


def _draws_from_torch(calls: list[tuple[ast.Call, str]]) -> bool:
    return any(_is_draw(full) for _node, full in calls)


def _prints_a_draw(calls: list[tuple[ast.Call, str]]) -> bool:
    """A draw's values passed to print itself: `print(F.dropout(torch.ones(1), p=0.5))` is a coin
    flip two runs agree on half the time (a review's plant passed `verify` 4 times in 8)."""
    draws = {id(node) for node, full in calls if _is_draw(full)}
    return any(
        full.rpartition(".")[2] in _SHOWN and any(id(arg) in draws for arg in node.args)
        for node, full in calls
    )


def _reads_a_value(nodes: list[ast.AST]) -> bool:
    """Whether the code takes a value out of a tensor to print or decide on: `.item()`,
    `.tolist()`, `int(...)`/`float(...)`/`bool(...)`, or a comparison."""
    for node in nodes:
        if isinstance(node, ast.Compare) and not any(
            _is_metadata(side) for side in (node.left, *node.comparators)
        ):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in _VALUE_READS) or (
                    isinstance(func, ast.Name) and func.id in ("int", "float", "bool") and node.args):  # fmt: skip
                return True
    return False


def _imported_names(nodes: list[ast.AST]) -> dict[str, str]:
    """What each imported name stands for, dotted: `rnd` for `random` after `import random as
    rnd`, `choice` for `random.choice` after `from random import choice` (an alias hid an
    unseeded coin from lint)."""
    names = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr) -> str:
    """`a.b.c` for a name and its attributes; what is not a name (a call, a subscript) is `?`:
    `torch.ones(1).data_ptr` is `?.data_ptr` (what matters of it is the last name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "?")
    return ".".join(reversed(parts))


def _full_name(func: ast.expr, names: dict[str, str]) -> str:
    """`rnd.random` as `random.random`, `np.random.rand` as `numpy.random.rand` (with their imports)."""
    dotted = _dotted(func) if isinstance(func, (ast.Attribute, ast.Name)) else ""
    first, _, rest = dotted.partition(".")
    return (names.get(first, first) + ("." + rest if rest else "")) if dotted else ""


def _call(node: ast.Call, full: str, seeded: set[str], sets: set[str]) -> list[str]:
    owner, _, name = full.rpartition(".")
    out = []
    if full in _OS_RANDOMNESS or owner == "secrets":
        out.append(f"calls {full}(): the OS's randomness differs in every run")
    if not owner and name in _ADDRESSES:
        out.append(f"calls {name}(): {_ADDRESSES[name]}")
    if name == "data_ptr":
        out.append("calls data_ptr(): a tensor's address changes with each Python process")
    if name == "getpid":
        out.append(
            "calls getpid(): a run here always has pid 1, a Python process of the learner's never"
        )
    if (owner == "time" and name in _CLOCKS) or (
        name in ("now", "utcnow", "today") and "date" in owner
    ):
        out.append("reads the clock")
    if (
        owner == "random"
        and name not in ("seed", "Random", "SystemRandom", "getstate", "setstate")
        and "random" not in seeded
    ):
        out.append("draws from Python's random module without random.seed()")
    if (
        owner in ("np.random", "numpy.random")
        and name not in ("seed", "default_rng")
        and "numpy" not in seeded
    ):
        out.append("draws from NumPy's global generator without numpy.random.seed()")
    if name == "default_rng" and not node.args and not node.keywords:
        out.append("makes a NumPy generator with no seed")
    shown = [
        a.value if isinstance(a, ast.Starred) else a for a in node.args
    ]  # print(*{...}) walks it too
    if (name in _SHOWN or name == "join") and any(_is_set(a, sets) for a in shown):
        out.append(
            "prints or walks a set: the order of a set of strings changes with each Python process"
        )
    return out


def _is_set(node: ast.expr, sets: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """A set made there (`{...}`, `set(...)`), or a name the code bound to one (`sets`)."""
    if isinstance(node, (ast.Set, ast.SetComp)):
        return True
    if isinstance(node, ast.Name):
        return node.id in sets
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("set", "frozenset")
    )


def _seeds(calls: list[tuple[ast.Call, str]], module: str) -> bool:
    """Whether the code seeds `module`'s generator with a value: `seed()` and `seed(None)` seed
    it from the OS, as an unseeded one is."""
    for node, full in calls:
        owner, _, name = full.rpartition(".")
        given = [*node.args, *(k.value for k in node.keywords)]
        with_value = bool(given) and not (
            isinstance(given[0], ast.Constant) and given[0].value is None
        )
        if module == "torch" and with_value and name == "manual_seed" and owner.startswith("torch"):
            return True
        if (
            name == "seed"
            and with_value
            and (owner == module or (module == "numpy" and owner in ("np.random", "numpy.random")))
        ):
            return True
    return False
