"""The quick tier's rules (tests/support/tiers.py): what they find, and that their table is current."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tiers
from tests.support.cli import REPO, ampquiz


def _runs_the_cli() -> None:
    ampquiz("--help")


def _helper_of_a_helper() -> None:
    _runs_the_cli()


def _imports_it_itself() -> None:
    import subprocess as sp

    sp.run(["true"], check=True)


def _pure() -> int:
    return len(str(Path("x")))


# What the tests below hand the tier's rules, and the processes they (pretend to) start, in a dict:
# the rules follow names, not what a dict holds, so these tests stay in the quick tier themselves.
SAMPLES = {"helpers": _helper_of_a_helper, "import": _imports_it_itself, "pure": _pure}
START = {
    "python": lambda: subprocess.Popen([sys.executable, "-c", "pass"]),
    "true": lambda: subprocess.Popen(["true"]),
}


def test_a_process_started_through_helpers_or_an_import_inside_is_found() -> None:
    assert tiers.starts_processes([SAMPLES["helpers"]]) == "ampquiz"
    assert tiers.starts_processes([SAMPLES["import"]]) == "subprocess"
    assert tiers.starts_processes([SAMPLES["pure"]]) is None


def test_every_entry_of_the_table_names_a_test_that_exists() -> None:
    """A test renamed or moved would otherwise drop back into the quick tier unseen."""
    for key in tiers.SLOW_IN_PROCESS:
        file, _, name = key.partition("::")
        path = REPO / file
        assert path.is_file(), key
        defined = re.compile(rf"^\s*(async )?def {re.escape(name)}\(", re.MULTILINE)
        assert not name or defined.search(path.read_text()), key


class _Item:
    """Stands for a running test: `nodeid` and its markers."""

    nodeid = "tests/test_tiers.py::a_quick_test"

    def __init__(self, slow: bool) -> None:
        self.slow = slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


class _NotStarted(Exception):
    """What the stand-in for starting a process raises, having noted what it was asked to start."""


@pytest.mark.parametrize("slow", [False, True])
def test_a_quick_test_that_starts_python_fails_saying_to_mark_it(
    monkeypatch: pytest.MonkeyPatch, slow: bool
) -> None:
    asked: list[list[str]] = []

    def execute_child(self: object, args: list[str], *rest: object) -> None:
        asked.append(args)
        raise _NotStarted

    monkeypatch.setattr("subprocess.Popen._execute_child", execute_child)
    monkeypatch.setattr(tiers, "_current", {"item": _Item(slow)})
    if slow:
        with pytest.raises(_NotStarted):
            START["python"]()
        assert len(asked) == 1 and asked[0][1:] == ["-c", "pass"]
    else:
        with pytest.raises(AssertionError, match=r"in the quick tier: mark it @pytest.mark.slow"):
            START["python"]()
        assert asked == []
        with pytest.raises(_NotStarted):
            START["true"]()  # not Python: a tool that starts in a millisecond
        assert asked == [["true"]]
