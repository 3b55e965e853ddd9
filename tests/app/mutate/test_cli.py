"""`ampquiz mutate` as an author types it: mutants of GradScaler training code, each run, most
with a visible effect; distractors as YAML to paste; the record the cards read."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

from app.verify.record import load_mutant_records, load_records
from tests.app.mutate.test_cards import QUESTION, write_bank
from tests.app.mutate.test_rules import ACCUMULATION, OVERFLOW_THEN_FINE, TRAINING_LOOP
from tests.support.cli import ampquiz

AUTOCAST_LOOP = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(8, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(16, 8), torch.randn(16, 4)
for step in range(3):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
    loss = nn.functional.mse_loss(out.float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
print(out.dtype, loss.dtype, round(norm.item(), 2), scaler.get_scale())
"""

GRADSCALER_SNIPPETS = {
    "training-loop.py": TRAINING_LOOP,
    "overflow.py": OVERFLOW_THEN_FINE,
    "accumulation.py": ACCUMULATION,
    "autocast-loop.py": AUTOCAST_LOOP,
}


def test_every_gradscaler_snippet_gets_three_mutants_that_visibly_change_it(tmp_path: Path) -> None:
    files = []
    for name, code in GRADSCALER_SNIPPETS.items():
        (tmp_path / name).write_text(code)
        files.append(str(tmp_path / name))
    done = ampquiz("mutate", *files, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [q["target"] for q in body["questions"]] == files
    for q in body["questions"]:
        original = q["original"]["run"]
        assert original["status"] == "ok", (q["target"], original)
        visible = [m for m in q["mutants"] if m["visible_effect"]]
        assert len(visible) >= 3, (q["target"], [m["rule"] for m in q["mutants"]])
        for m in visible:  # visibly different: what it printed or raised is not the original's
            run = m["run"]
            assert (run["stdout"], run["exception"]) != (
                original["stdout"],
                original["exception"],
            ), m["rule"]
            assert (
                m["diff"].startswith("--- question\n+++ what if: ")
                and m["title"]
                and m["explanation"]
            )
        for m in q["mutants"]:
            assert set(m) == {"rule", "title", "explanation", "diff", "run", "visible_effect"}
            assert {"status", "stdout", "exception", "explanation", "environment"} <= set(m["run"])
    assert body["rules"]["drop-scale"]["applied"] == len(files)


def test_choices_to_paste_and_the_record_the_cards_read(tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "bank")
    done = ampquiz("mutate", "one-step", "--bank", str(bank), "--as-choices", "--record")
    assert done.returncode == 0, done.stderr
    assert "mutant record written:" in done.stderr
    assert done.stdout.startswith(
        "      # one-step: "
    )  # indented to sit under a question's `choices:`
    choices = yaml.safe_load(textwrap.dedent(done.stdout))
    assert len(choices) >= 3
    texts = [c["text"] for c in choices]
    assert len(set(texts)) == len(texts)
    for c in choices:
        assert set(c) == {"text", "correct", "why", "outcome"} and c["correct"] is False
        # What the run does, never which mistake ("(as if you forget scaler.update())" gave it away),
        # and as an outcome, checked by running: the code as written must not do it.
        assert c["text"].startswith(("It prints", "It raises")) and "as if" not in c["text"]
        assert set(c["outcome"]) in ({"stdout"}, {"raises"}, {"raises", "message"}), c["outcome"]
        assert (
            "proved by running that change" in c["why"]
            and "The code as written prints `0.8 65536.0`" in c["why"]
        )
    # pasted under the question, the bank still loads
    pasted = QUESTION.replace("    answer: 0.8 65536.0\n", "").replace(
        "kind: predict_output", "kind: multiple_choice"
    )
    pasted = pasted.replace("    explanation: One step.\n", "    choices:\n"
                            "      - {text: prints 0.8 65536.0, correct: true, why: it steps once, outcome: {stdout: 0.8 65536.0}}\n"
                            + done.stdout + "    explanation: One step.\n")  # fmt: skip
    (bank / "scaler.yaml").write_text(pasted)
    assert ampquiz("lint", str(bank)).returncode == 0
    proved = ampquiz(
        "verify", str(bank), "--only", "one-step"
    )  # each pasted outcome, not the code's
    assert proved.returncode == 0 and "1 passed" in proved.stdout, proved.stdout + proved.stderr
    (record,) = load_mutant_records(bank)
    assert list(record.questions) == ["one-step"] and load_records(bank) == []
    # the pasted choices change no code: the record still holds; a changed line makes it stale
    checked = ampquiz("mutate", "--check", "--bank", str(bank))
    assert checked.returncode == 0 and f"{record.path.name}: fresh" in checked.stdout, (
        checked.stdout
    )
    (bank / "scaler.yaml").write_text(pasted.replace("(w * 2.0)", "(w * 4.0)"))
    checked = ampquiz("mutate", "--check", "--bank", str(bank))
    assert checked.returncode == 1, checked.stdout
    assert (
        "stale, 1 questions" in checked.stdout
        and "one-step: its code changed since the record" in checked.stdout
    )


def test_an_unknown_target_is_refused(tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "bank")
    done = ampquiz("mutate", "no-such-question", "--bank", str(bank))
    assert done.returncode == 2 and "neither a file nor a question" in done.stderr
    assert ampquiz("mutate", "--bank", str(bank)).returncode == 2
