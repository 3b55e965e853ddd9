"""The quick tier (`make test-quick`): the tests that run in this process only.

A test is marked `slow`, and left out of the quick tier, when it drives a browser, starts a
sandbox pool of its own, needs a GPU, or starts a process: a server, workers, the command line, a
fresh Python to compare with. No one marks those by hand: `mark_slow` finds them from their markers
and from what the test and its fixtures use (`subprocess`, `Server`, `WorkerProcess`, `ampquiz`, …,
followed through the helpers under tests/), so a new test lands in its tier by itself. A test
that runs in-process but waits seconds on purpose (a timeout, a run's limit) is named in
`IN_PROCESS_BUT_SLOW` with why, or says `@pytest.mark.slow` where it is written.

What the code reading misses, `watch_python_starts` catches as it happens: a test left in the
quick tier that starts a Python process fails, saying to mark it. The shared pool's zygote is
no test's own (it is started once, for every test).
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SLOW_MARKERS = ("browser", "own_pool", "gpu", "slow")
"""A test with one of these markers is in the slow tier whatever it uses."""

IN_PROCESS_BUT_SLOW: dict[str, tuple[str, ...]] = {
    # Why: the tests that start no process but take a second or more each on a 2-core host, left
    # out so the quick tier stays under a minute. Each as "file::test" (all its parameters), or a
    # whole file. Each waits out, on purpose, what it is about.
    "a run's wall or CPU limit, or a share of the CPU or the disk, measured": (
        "tests/sandbox/test_isolation.py::test_fork_bomb_contained",
        "tests/sandbox/test_isolation.py::test_infinite_loop_stopped_at_cpu_limit",
        "tests/sandbox/test_isolation.py::test_sleep_stopped_at_wall_time",
        "tests/sandbox/test_isolation.py::test_runs_at_the_same_time_do_not_share_a_network",
        "tests/sandbox/test_forged_reports.py::test_a_report_trickled_a_byte_at_a_time_costs_the_pool_little_cpu",
        "tests/sandbox/test_forged_reports.py::test_forged_report_then_only_the_main_thread_ending_is_stopped_at_wall_time",
        "tests/sandbox/test_forged_reports.py::test_forged_report_then_running_on_is_stopped_at_wall_time",
        "tests/sandbox/test_hostile_channels.py::test_junk_on_the_report_channel_cannot_hold_a_worker_past_wall_time",
        "tests/sandbox/test_leftovers_and_cpu.py::test_a_used_runner_is_replaced_only_after_its_result_is_delivered",
        "tests/sandbox/test_leftovers_and_cpu.py::test_cpu_cores_sets_the_share",
        "tests/sandbox/test_leftovers_and_cpu.py::test_many_spinning_children_share_one_core",
        "tests/sandbox/test_leftovers_and_cpu.py::test_nothing_outlives_a_run_not_even_what_blocks_in_the_kernel",
        "tests/sandbox/test_leftovers_and_cpu.py::test_runners_being_prepared_cant_take_the_cpu_from_a_run",
        "tests/sandbox/test_disk_share.py::test_read_ahead_hints_queue_nothing_behind_the_cap",
        "tests/sandbox/test_disk_share.py::test_reading_the_disk_goes_no_faster_than_the_cap",
        "tests/sandbox/test_filesystem_view.py::test_two_runs_at_once_share_no_folder_either_can_write",
    ),
    "runs that sleep, to hold the pool's workers while the queue is watched": (
        "tests/app/web/test_fair_queue.py",
        "tests/app/web/test_errors.py::test_429_with_retry_after_when_workers_and_queue_are_full",
        "tests/app/web/test_errors.py::test_retry_after_says_when_the_queue_really_has_room",
    ),
    "a timeout or the bank watcher's interval, waited out": (
        "tests/app/test_store.py::test_a_database_server_that_never_answers_fails_the_store_in_bounded_time",
        "tests/app/web/test_connections.py::test_a_connection_that_sends_nothing_or_a_body_too_slowly_is_closed",
        "tests/app/web/test_connections.py::test_a_request_arriving_in_pieces_within_the_deadline_is_served_and_so_is_the_next",
        "tests/app/web/test_connections.py::test_a_request_head_that_never_ends_gets_408_and_its_connection_is_closed",
        "tests/app/web/test_pages.py::test_a_question_changed_since_it_was_answered_starts_afresh",
        "tests/app/web/test_pages.py::test_a_set_added_while_the_server_runs_is_served",
    ),
    "the whole real bank: every question run, mutated, exported or rendered": (
        "tests/sandbox/explain/test_agrees_with_torch.py::test_every_cpu_snippet_in_the_bank_agrees_with_debugmode",
        "tests/sandbox/explain/test_agrees_with_torch.py::test_op_probes_agree_with_debugmode_and_name_the_list_torch_uses",
        "tests/questions/test_bank.py::test_every_key_agrees_with_the_run_learners_are_shown",
        "tests/app/mutate/test_bank.py",
        "tests/app/mutate/test_committed_record.py::test_the_committed_record_matches_the_bank_and_the_rules",
        "tests/app/export/test_qti.py::test_the_real_bank_exports_whole",
        "tests/app/web/test_pages.py::test_every_question_in_the_real_bank_renders",
    ),
    "a long run or many writes, the size being the point": (
        "tests/sandbox/explain/test_unseen_by_the_snippet.py::test_a_loops_hazard_is_still_found_when_its_checks_thin_out",
        "tests/sandbox/explain/test_report.py::test_a_thousand_step_loop_gives_a_small_folded_report",
        "tests/sandbox/explain/test_report.py::test_many_distinct_calls_are_capped",
        "tests/sandbox/test_filesystem_view.py::test_torch_compiles_default_backend_says_what_to_use_instead",
        "tests/app/test_store.py::test_a_summary_kept_by_one_process_is_what_a_whole_read_gives",
    ),
}
SLOW_IN_PROCESS = {test: why for why, tests in IN_PROCESS_BUT_SLOW.items() for test in tests}
"""Each of those, with why (tests/test_tiers.py checks that each still names a test)."""

SPAWNING_MODULES = ("subprocess", "multiprocessing")
"""A test (or a helper of tests/) that uses these starts processes."""

_TESTS = Path(__file__).resolve().parents[1]


def _spawners() -> tuple[object, ...]:
    """The helpers of tests/support that start a process, whatever the test does with them."""
    from tests.support.cli import ampquiz
    from tests.support.server import Server
    from tests.support.workers import WorkerProcess

    return (ampquiz, Server, WorkerProcess)


def _ours(obj: object) -> bool:
    """Defined in a file under tests/ (a helper whose body is read too)."""
    try:
        source = getattr(obj, "__file__", None) or sys.modules[obj.__module__].__file__  # type: ignore[attr-defined]
    except (AttributeError, KeyError):
        return False
    return source is not None and Path(source).resolve().is_relative_to(_TESTS)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and the code nested in it (its lambdas, inner functions, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(obj: object) -> Iterator[types.FunctionType]:
    """The plain functions behind a fixture, a test, a method or a class defined under tests/."""
    obj = getattr(obj, "__wrapped__", obj)
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        yield from (f for f in (obj.fget, obj.fset) if isinstance(f, types.FunctionType))
    elif isinstance(obj, types.MethodType):
        yield from _functions(obj.__func__)
    elif isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, type) and _ours(obj):
        for value in vars(obj).values():
            yield from _functions(value)


def _named_in(function: types.FunctionType) -> tuple[set[str], list[object]]:
    """The names `function`'s code reads, and what they may stand for."""
    names = {name for code in _codes(function.__code__) for name in code.co_names}
    values = [function.__globals__.get(name) for name in names]
    values += [sys.modules.get(name) for name in names if "." in name]  # `from x.y import z` in it
    for module in [v for v in values if isinstance(v, types.ModuleType) and _ours(v)]:
        values += [getattr(module, name, None) for name in names]  # `support.helper(...)`
    return names, values


def starts_processes(functions: list[Any]) -> str | None:
    """What makes code reachable from `functions` start a process (a name), or None."""
    spawners = _spawners()
    seen: set[int] = set()
    todo = [f for obj in functions for f in _functions(obj)]
    while todo:
        function = todo.pop()
        if id(function) in seen or function.__module__ == __name__:  # these rules start nothing
            continue
        seen.add(id(function))
        names, values = _named_in(function)
        if found := names.intersection(SPAWNING_MODULES):  # imported inside the function, say
            return min(found)
        for value in values:
            if isinstance(value, types.ModuleType):
                if value.__name__.split(".")[0] in SPAWNING_MODULES:
                    return value.__name__
            elif any(value is spawner for spawner in spawners):
                return getattr(value, "__qualname__", repr(value))
            elif value is not None and _ours(value):
                todo.extend(_functions(value))
    return None


def why_slow(item: pytest.Item) -> str | None:
    """Why `item` is left out of the quick tier, or None when it belongs there."""
    if item.path.is_relative_to(_TESTS / "browser"):
        return "a browser test"
    where = item.path.relative_to(_TESTS.parent).as_posix()
    for key in (where, f"{where}::{getattr(item, 'originalname', item.name)}"):
        if key in SLOW_IN_PROCESS:
            return SLOW_IN_PROCESS[key]
    for name in SLOW_MARKERS:
        if item.get_closest_marker(name) is not None:
            return f"marked {name}"
    functions: list[Any] = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        functions += [d.func for defs in info.name2fixturedefs.values() for d in defs]
    found = starts_processes([f for f in functions if f is not None])
    return f"starts processes ({found})" if found else None


def mark_slow(items: list[pytest.Item]) -> None:
    """Marks `slow` every collected test that does not belong in the quick tier."""
    for item in items:
        if why_slow(item) is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


_current: dict[str, pytest.Item | None] = {"item": None}


def set_current_item(item: pytest.Item | None) -> None:
    _current["item"] = item


def _is_python(args: Any) -> bool:
    argv = [args] if isinstance(args, (str, bytes, Path)) else list(args or [])
    if not argv:
        return False
    program = Path(str(argv[0] if not isinstance(argv[0], bytes) else argv[0].decode())).name
    return program == Path(sys.executable).name or program.startswith("python")


def _is_the_shared_zygote(args: Any) -> bool:
    """The pool's zygote, started (or started again, by its refill thread) for every test."""
    return not isinstance(args, (str, bytes)) and "sandbox.zygote" in [str(a) for a in args]


def watch_python_starts() -> None:
    """Wraps `subprocess.Popen` so a test in the quick tier that starts a Python process fails."""
    original = subprocess.Popen.__init__
    if getattr(original, "_watched", False):
        return

    def init(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
        item = _current["item"]
        if (item is not None and item.get_closest_marker("slow") is None and _is_python(args)
                and not _is_the_shared_zygote(args)):  # fmt: skip
            command = args if isinstance(args, (str, bytes)) else " ".join(map(str, args))
            raise AssertionError(
                f"{item.nodeid} starts a Python process ({command[:120]!s}) but is in "
                "the quick tier: mark it @pytest.mark.slow (tests/support/tiers.py did not see it)"
            )
        original(self, args, *rest, **kwargs)

    init._watched = True  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
