"""The explainer corpus: for each mechanism the explanation must name, snippets whose explained
run says it, written from what torch does.

Each `corpus/<mechanism>__<case>.snippet` is a plain Python file; its `#!` comment lines say what
it shows (free text) and what the explanation must say (expectations):

    #! summary: did not skip the step            the summary contains this text
    #! no summary: skipped the optimizer step    ... and not this
    #! scaler@17: "in_optimizer": true           an event on line 17, as JSON, contains it
    #! text: state created for 1                 `ampquiz run --explain` prints it

Fields: `summary`, `text` (the whole explanation as the terminal prints it), `ops`, `scaler`,
`hazards` (their entries as JSON, one per line; `@N` keeps those on line N) and `error`.

Every snippet is checked three ways: its explained run prints what a fresh `python snippet.py`
prints (and raises what it raises), every expectation holds, and its op rows agree with torch's
own DebugMode account of the same run (`torch_reference`; rows it cannot see, such as those read
from a compiled graph, are left out there as in the bank's agreement test). The snippets print
what shows the mechanism happened (optimizer state, losses that stop moving, a weight that moved
twice as far), so the fresh run is the evidence the explanation is checked against.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from app.explain_text import format_explanation, lead_findings
from sandbox import Limits, Sandbox
from sandbox.claims import DROPPED_EXPLANATION
from tests.sandbox.explain.torch_reference import (
    compare,
    ops_of_explanation,
    ops_of_reference,
    reference_snippet,
    truncate_casts,
)

CORPUS = Path(__file__).with_name("corpus")
NAMES = sorted(p.stem for p in CORPUS.glob("*.snippet"))
MECHANISMS = sorted({n.split("__")[0] for n in NAMES})
FIELDS = ("summary", "text", "ops", "scaler", "hazards", "error")
_EXPECT = re.compile(
    r"#! (?P<no>no )?(?P<field>" + "|".join(FIELDS) + r")(?:@(?P<line>\d+))?: (?P<text>.+)$"
)
AMPLE = Limits(wall_s=60.0, cpu_s=60)


def expectations(code: str) -> list[tuple[bool, str, int | None, str]]:
    """(must hold?, field, line or None, text) for each expectation line of a snippet."""
    found = []
    for raw in code.splitlines():
        m = _EXPECT.match(raw.strip())
        if m:
            line = int(m["line"]) if m["line"] else None
            found.append((not m["no"], m["field"], line, m["text"].strip()))
    return found


def rendered(field: str, line: int | None, report: dict[str, Any], warnings: list[Any]) -> str:
    if field == "summary":
        return "\n".join(report.get("summary") or [])
    if field == "text":
        return format_explanation(report, columns=None, lead=lead_findings(warnings))
    if field == "error":
        return json.dumps(report.get("error"))
    rows = [r for r in report.get(field) or [] if line is None or r.get("line") == line]
    return "\n".join(json.dumps(r) for r in rows)


@pytest.fixture(scope="module")
def fresh(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, subprocess.CompletedProcess[str]]:
    """The selected snippets run by a fresh `python`, on one thread as a run has it, two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    selected = sorted(
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_the_explanation_names_the_mechanism"
    )
    root = tmp_path_factory.mktemp("fresh")

    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        folder = root / name
        folder.mkdir()
        (folder / "snippet.py").write_text((CORPUS / f"{name}.snippet").read_text())
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "snippet.py"], check=False, cwd=folder, capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
        return name, done

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(ex.map(run, selected))


def test_every_mechanism_has_its_snippets() -> None:
    """The corpus covers each mechanism of the issue with more than its one example."""
    expected = {"cast_cache", "checkpoint", "compiled", "custom_fwd", "fused_step", "inplace",
                "scale_mismatch", "scaled_grads", "summary_counts"}  # fmt: skip
    assert set(MECHANISMS) == expected, MECHANISMS
    for mechanism in MECHANISMS:
        cases = [n for n in NAMES if n.startswith(mechanism + "__")]
        assert len(cases) >= 3, (mechanism, cases)


@pytest.mark.parametrize("name", NAMES)
def test_the_explanation_names_the_mechanism(
    sandbox_pool: Sandbox, fresh: dict[str, subprocess.CompletedProcess[str]], name: str
) -> None:
    code = (CORPUS / f"{name}.snippet").read_text()
    wanted = expectations(code)
    assert wanted, f"{name} states no expectation: a snippet that checks nothing cannot fail"
    r = sandbox_pool.run(code, AMPLE, explain=True)
    plain = fresh[name]
    assert r.stdout == plain.stdout, (name, r.stdout, plain.stdout, plain.stderr[-2000:])
    if plain.returncode:
        raised = plain.stderr.strip().splitlines()[-1].split(":")[0].rsplit(".", 1)[-1]
        assert r.status == "error" and r.exception is not None and r.exception.type == raised, (
            r.status,
            raised,
        )
    else:
        assert r.status == "ok", (r.status, r.message, r.stderr[-2000:])
    report = r.explanation
    assert report is not None and report["summary"] != [DROPPED_EXPLANATION], report
    assert not report.get("explainer_errors"), report.get("explainer_errors")
    warnings = [w.__dict__ for w in r.warnings]
    failed = []
    for must, field, line, text in wanted:
        shown = rendered(field, line, report, warnings)
        if (text in shown) != must:
            where = f"@{line}" if line is not None else ""
            failed.append(
                f"{'' if must else 'no '}{field}{where}: {text!r}\n--- it reads:\n{shown}"
            )
    assert not failed, f"{name}:\n" + "\n\n".join(failed)


def test_the_corpus_agrees_with_debugmode(sandbox_pool: Sandbox) -> None:
    """Our op rows of every corpus snippet, call for call, as torch's DebugMode records them."""
    problems = {}
    for name in NAMES:
        code = textwrap.dedent((CORPUS / f"{name}.snippet").read_text())
        report = sandbox_pool.run(code, AMPLE, explain=True).explanation
        ref = sandbox_pool.run(reference_snippet(code), AMPLE)
        assert ref.status in ("ok", "error"), (name, ref.status, ref.stderr[-2000:])
        theirs, _ = ops_of_reference(ref.stdout)
        if diff := compare(ops_of_explanation(report), truncate_casts(theirs)):
            problems[name] = diff
    print(f"corpus vs DebugMode: {len(NAMES)} snippets")
    assert not problems, "\n".join(f"{n}:\n  " + "\n  ".join(d) for n, d in problems.items())
