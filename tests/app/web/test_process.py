"""`app.web.process`, what each process of `serve --processes N` imports: it starts on the cores
`serve` names, with no cyclic garbage collection, and has every core and the collector back
once its app is built (a real process, as uvicorn spawns it; about two seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import BANK

CHILD = """
import gc, json, os
import app.web.process as process
during = (sorted(os.sched_getaffinity(0)), gc.isenabled())
process.create_app()
print(json.dumps({"during": during, "after": (sorted(os.sched_getaffinity(0)), gc.isenabled())}))
"""


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _pid: ())(0)) < 2, reason="needs two cores")
def test_a_web_process_starts_on_the_cores_it_is_given_and_then_has_them_all(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "_AMPQUIZ_STARTUP_CPUS": str(cores[0]), "AMPQUIZ_BANK": str(BANK),
           "AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["during"] == [[cores[0]], False]
    assert seen["after"] == [cores, True]
