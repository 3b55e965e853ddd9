"""Verifying the whole bank through the warm pool (--jobs 2) against a cold `python` per question.

Both sides run the same questions' code, one after another for the cold side, in one run of this
script. Target: >= 20x. Usage: `python bench/verify_bank.py [--cold-sample N]` (N questions for the
cold side, scaled up to the bank; default: all of them).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.bank import load_bank
from app.verify.check import skip_reason, verify_questions
from bench._stats import line
from sandbox import Sandbox


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bank", default=str(ROOT / "questions"))
    ap.add_argument(
        "--cold-sample", type=int, default=0, help="cold-run only N questions and scale (0 = all)"
    )
    args = ap.parse_args()
    bank = load_bank(args.bank)
    runnable = [q for q in bank.questions if not skip_reason(q.question, "cpu")]

    t = time.perf_counter()
    with Sandbox(workers=2) as sb:
        started = time.perf_counter()
        outcomes = verify_questions(runnable, sb, jobs=2)
        warm_runs_s = time.perf_counter() - started
    warm_total_s = time.perf_counter() - t
    failed = [o.id for o in outcomes if o.result == "fail"]

    sample = runnable[: args.cold_sample] if args.cold_sample else runnable
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for q in sample:
            subprocess.run(
                [sys.executable, "-c", q.question.code],
                capture_output=True,
                cwd=tmp,
                timeout=120,
                check=False,
            )
    cold_s = (time.perf_counter() - t) * len(runnable) / len(sample)

    print(
        f"{len(runnable)} runnable questions ({len(bank.questions)} in the bank); {len(failed)} failed"
    )
    print(line("warm pool, --jobs 2 (runs only)", f"{warm_runs_s:8.2f} s"))
    print(line("warm pool, --jobs 2 (incl. pool start)", f"{warm_total_s:8.2f} s"))
    scaled = f" (measured {len(sample)}, scaled)" if len(sample) != len(runnable) else ""
    print(line(f"cold python per question, sequential{scaled}", f"{cold_s:8.2f} s"))
    print(line("speed-up (cold / warm incl. start)", f"{cold_s / warm_total_s:8.1f} x"))
    print(line("speed-up (cold / warm runs only)", f"{cold_s / warm_runs_s:8.1f} x"))


if __name__ == "__main__":
    main()
