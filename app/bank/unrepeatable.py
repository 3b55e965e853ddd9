"""What in a question's code makes what it prints differ from one Python process to the next,
where two runs here cannot show it.

`verify` and the server prove a key by running the code twice and comparing, but both runs are
forks of one warm process: string hashes (so the order of a set of strings), object addresses
(`id()`, `data_ptr()`) and the pid (always 1 in the sandbox) are the same in both, and a coarse
random or timed value (a coin flip, a minute's parity) agrees often enough to pass. A learner's
own `python` gives something else. Lint warns about each, at the question's line; an unseeded
draw from Python's or NumPy's generator too. (torch's own generators are left to the two runs:
they are seeded from the OS in every run, as in a fresh process, and the bank draws from them
unseeded wherever only a dtype is printed.)
"""

from __future__ import annotations

import ast

_ADDRESSES = {"id": "an object's address changes with each Python process",
              "hash": "a string's hash changes with each Python process"}
_CLOCKS = {"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time"}
_SHOWN = {"print", "str", "repr", "list", "tuple", "enumerate", "iter", "next"}


def unrepeatable(code: str) -> list[str]:
    """Why what `code` prints may differ in another Python process, one reason per kind."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []  # a run says what is wrong with it
    said: dict[str, None] = {}
    names = _imported_names(tree)
    seeded = {module for module in ("random", "numpy") if _seeds(tree, module, names)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            said.update(dict.fromkeys(_call(node, seeded, names)))
        elif isinstance(node, ast.For) and _is_set(node.iter):
            said["walks a set: the order of a set of strings changes with each Python process"] = None
    return list(said)


def _imported_names(tree: ast.AST) -> dict[str, str]:
    """What each imported name stands for, dotted: `rnd` for `random` after `import random as
    rnd`, `choice` for `random.choice` after `from random import choice` (an alias hid an
    unseeded coin from lint)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _full_name(func: ast.expr, names: dict[str, str]) -> str:
    """`rnd.random` as `random.random`, `np.random.rand` as `numpy.random.rand` (with their imports)."""
    dotted = ast.unparse(func) if isinstance(func, (ast.Attribute, ast.Name)) else ""
    first, _, rest = dotted.partition(".")
    return (names.get(first, first) + ("." + rest if rest else "")) if dotted else ""


def _call(node: ast.Call, seeded: set[str], names: dict[str, str]) -> list[str]:
    owner, _, name = _full_name(node.func, names).rpartition(".")
    out = []
    if not owner and name in _ADDRESSES:
        out.append(f"calls {name}(): {_ADDRESSES[name]}")
    if name == "data_ptr":
        out.append("calls data_ptr(): a tensor's address changes with each Python process")
    if name == "getpid":
        out.append("calls getpid(): a run here always has pid 1, a Python process of the learner's never")
    if (owner == "time" and name in _CLOCKS) or (name in ("now", "utcnow", "today") and "date" in owner):
        out.append("reads the clock")
    if owner == "random" and name not in ("seed", "Random", "SystemRandom") and "random" not in seeded:
        out.append("draws from Python's random module without random.seed()")
    if owner in ("np.random", "numpy.random") and name not in ("seed", "default_rng") and "numpy" not in seeded:
        out.append("draws from NumPy's global generator without numpy.random.seed()")
    if name == "default_rng" and not node.args and not node.keywords:
        out.append("makes a NumPy generator with no seed")
    shown = [a.value if isinstance(a, ast.Starred) else a for a in node.args]  # print(*{...}) walks it too
    if (name in _SHOWN or name == "join") and any(_is_set(a) for a in shown):
        out.append("prints or walks a set: the order of a set of strings changes with each Python process")
    return out


def _is_set(node: ast.expr) -> bool:
    if isinstance(node, (ast.Set, ast.SetComp)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset")


def _seeds(tree: ast.AST, module: str, names: dict[str, str]) -> bool:
    """Whether the code seeds `module`'s generator with a value: `seed()` and `seed(None)` seed
    it from the OS, as an unseeded one is."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        owner, _, name = _full_name(node.func, names).rpartition(".")
        given = [*node.args, *(k.value for k in node.keywords)]
        with_value = bool(given) and not (isinstance(given[0], ast.Constant) and given[0].value is None)
        if name == "seed" and with_value and (owner == module or (module == "numpy" and owner in ("np.random", "numpy.random"))):
            return True
    return False
