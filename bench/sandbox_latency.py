"""This tree's sandbox against a base revision's, side by side in one run: runs/s with two workers
busy and warm latency; and warm runs against a cold `python -c` on the same snippet.

Both sandboxes run the same way: each in a child process of its own (this file in `--serve` mode),
the base one from a checkout of `--base` taken with `git archive` into a temporary folder (nothing
in this checkout changes), this tree's from the working tree. They take turns, block by block,
while the other one idles, so background load on a shared machine falls on both alike.

Targets (issue 20, 2-core CPU): runs/s with two workers busy >= 1.4x the base's; warm p50 no
more than 1.5 ms above the base's. The default base is the last commit before that work.

Per run it also prints the CPU the sandbox spent (the zygote and its runners, read from /proc),
the pool's own (the serving process's threads) and the page faults of the zygote and its runners:
where a throughput change comes from, and steadier than runs/s on a machine shared with others.

On a CUDA host, `--device cuda` times the same snippet on the GPU (issue 19): warm runs against a
cold `python -c` that imports torch and starts CUDA, and runs/s with `--workers` busy. Targets:
warm p50 <= 25 ms and >= 100x faster than cold. There is no base to compare with: the pool
prepares each runner's CUDA context before code arrives, so a warm run pays none of it.

Usage: `python bench/sandbox_latency.py [--device cpu|cuda] [--workers N] [--base REV|none]
[--rounds N] [--seconds S] [--warm N] [--cold N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASE = "07e6991"
"""The last commit before issue 20's sandbox work: the zygote did no warm-up then."""

SNIPPET = """\
import torch
layer = torch.nn.Linear(8, 4)
with torch.autocast("cpu", dtype=torch.float16):
    y = layer(torch.ones(2, 8))
print(y.dtype)
"""

SNIPPETS = {
    "cpu": SNIPPET,
    "cuda": SNIPPET.replace("torch.nn.Linear(8, 4)", "torch.nn.Linear(8, 4).cuda()")
    .replace("torch.ones(2, 8)", "torch.ones(2, 8, device='cuda')")
    .replace('autocast("cpu"', 'autocast("cuda"'),
}
"""The same snippet per device: on CUDA it also starts CUDA, which is what a cold run pays for."""


def cold_runs(n: int, device: str) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(n):
            t = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", SNIPPETS[device]],
                capture_output=True,
                text=True,
                cwd=tmp,
                check=False,
            )
            times.append((time.perf_counter() - t) * 1000)
            assert out.stdout == "torch.float16\n", out
    return times


# ---- child mode: one pool, answering one command per line ------------------------------------


def warm_runs(sb, n: int, pause_s: float, device: str = "cpu") -> list[float]:
    """`pause_s` between runs lets the pool prepare the next process, as it does between a
    learner's clicks; with no pause each run also competes with that preparation for the CPU."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = sb.run(SNIPPETS[device], device=device if device == "cuda" else None)
        times.append((time.perf_counter() - t) * 1000)
        assert r.status == "ok" and r.stdout == "torch.float16\n", r
        time.sleep(pause_s)
    return times


def _cpu_s(pid: int | None = None) -> float:
    """CPU seconds of a process and of the children it has reaped (the zygote reaps its runners);
    of this process alone when `pid` is None."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _faults(pid: int) -> int:
    """Minor page faults of a process and of the children it has reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7]) + int(fields[8])


def throughput(sb, seconds: float, device: str = "cpu", clients: int = 2) -> dict[str, float]:
    """`clients` back to back for `seconds`: runs, elapsed time and the CPU spent on them."""
    done = 0
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            r = sb.run(SNIPPETS[device], device=device if device == "cuda" else None)
            assert r.status == "ok", r
            with lock:
                done += 1

    # `Sandbox.zygote` is this tree's; an earlier commit's pool (the base) kept it as `_zygote`.
    zygote = (sb.zygote if hasattr(sb, "zygote") else sb._zygote).pid
    cpu0, pool0, faults0 = _cpu_s(zygote), _cpu_s(), _faults(zygote)
    threads = [threading.Thread(target=client) for _ in range(clients)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t
    # The runners of the last runs end (and are reaped) a moment after their results come back.
    time.sleep(0.5)
    return {
        "runs": done, "s": elapsed, "sandbox_cpu_s": _cpu_s(zygote) - cpu0, "pool_cpu_s": _cpu_s() - pool0,
        "faults": _faults(zygote) - faults0,
    }  # fmt: skip


def serve(root: str, device: str, workers: int) -> None:
    sys.path.insert(0, root)
    from sandbox import Sandbox

    with Sandbox(workers=workers) as sb:
        if device == "cuda" and sb.environment.get("device_kind") != "cuda":
            raise SystemExit("--device cuda: this host's sandbox found no CUDA GPU")
        warm_runs(sb, 5, 0.2, device)
        hello = {
            "huge_mib": sb.huge_page_bytes >> 20,
            "device_name": sb.environment.get("device_name"),
        }
        print(json.dumps(hello), flush=True)
        for line in sys.stdin:
            what, *args = line.split()
            if what == "warm":
                print(json.dumps(warm_runs(sb, int(args[0]), float(args[1]), device)), flush=True)
            elif what == "throughput":
                print(json.dumps(throughput(sb, float(args[0]), device, workers)), flush=True)
            else:
                return


# ---- the parent: two pools taking turns ------------------------------------------------------


class Pool:
    """A sandbox pool in a child process, started from the sandbox package under `root`."""

    def __init__(self, root: str, device: str, workers: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", root, "--device", device, "--workers", str(workers)],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.hello = self.ask("")

    def ask(self, command: str):
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise SystemExit(
                f"the pool under {command or 'start'} died (exit code {self.proc.wait()})"
            )
        return json.loads(answer)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask("quit")
            except (OSError, ValueError, SystemExit):
                pass
        self.proc.wait(timeout=60)


def checkout(rev: str, into: str) -> str:
    """The base revision's sandbox package, extracted beside this tree; returns its full hash."""
    full = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", full, "sandbox"], capture_output=True, check=True
    )
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return full


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--base",
        default=BASE,
        help=f"revision whose sandbox to compare with, or 'none' (default {BASE})",
    )
    ap.add_argument(
        "--rounds", type=int, default=4, help="turns each pool takes (throughput and warm blocks)"
    )
    ap.add_argument("--seconds", type=float, default=4.0, help="throughput seconds per turn")
    ap.add_argument(
        "--warm",
        type=int,
        default=25,
        help="warm runs per turn, --pause apart, then as many back to back",
    )
    ap.add_argument(
        "--pause",
        type=float,
        default=None,
        help="seconds between warm runs (default 0.2 on cpu, 1.0 on cuda, where preparing a runner "
        "starts a CUDA context: runs 0.2 s apart outpaced 4 workers' preparation and timed the wait)",
    )
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the snippet runs (default cpu)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=2,
        help="the pool's workers, each kept busy by a client (default 2)",
    )
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve, args.device, args.workers)
    if args.device == "cuda":
        args.base = "none"  # the base's targets were set on the CPU
    if args.pause is None:
        args.pause = 1.0 if args.device == "cuda" else 0.2
    sys.path.insert(0, str(REPO))
    from bench._stats import line, p50, percentile

    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "sandbox"],
                           capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(
        f"host: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; snippet: autocast Linear + print(y.dtype), "
        f"on {args.device}, {args.workers} workers"
    )
    print(f"this tree: {head}{' + uncommitted sandbox changes' if dirty else ''}")
    names = ["now"]
    with tempfile.TemporaryDirectory(prefix="ampquiz-base-") as tmp:
        pools = {"now": Pool(str(REPO), args.device, args.workers)}
        print(f"device: {pools['now'].hello['device_name']}")
        try:
            if args.base != "none":
                full = checkout(args.base, tmp)
                print(f"base: {full} (its sandbox/ via git archive, started from {tmp})")
                pools["base"] = Pool(tmp, args.device, args.workers)
                names.append("base")
            samples: dict[str, dict[str, list]] = {
                n: {"warm": [], "back": [], "tp": []} for n in names
            }
            for r in range(args.rounds):
                # Alternate who goes first, so neither always follows the other's clean-up.
                for name in names if r % 2 == 0 else names[::-1]:
                    pool, got = pools[name], samples[name]
                    got["tp"].append(pool.ask(f"throughput {args.seconds}"))
                    time.sleep(
                        1.0 + 2 * args.pause
                    )  # let this pool's runners be prepared again before it is timed
                    got["warm"] += pool.ask(f"warm {args.warm} {args.pause}")
                    got["back"] += pool.ask(f"warm {args.warm} 0.0")
                    time.sleep(1.0)  # and let it settle before the other pool is measured
            huge = {n: pools[n].hello["huge_mib"] for n in names}
        finally:
            for pool in pools.values():
                pool.close()
    cold = cold_runs(args.cold, args.device)

    def rate(name: str) -> float:
        tp = samples[name]["tp"]
        return sum(t["runs"] for t in tp) / sum(t["s"] for t in tp)

    def cpu_ms(name: str, key: str) -> float:
        tp = samples[name]["tp"]
        return 1000 * sum(t[key] for t in tp) / sum(t["runs"] for t in tp)

    if cold:  # --cold 0 leaves the cold runs out
        print(line(f"cold python -c p50 ({args.cold} runs)", f"{p50(cold):8.1f} ms"))
    for name in names:
        s = samples[name]
        label = "this tree" if name == "now" else f"base {args.base}"
        per_turn = ", ".join(f"{t['runs'] / t['s']:.1f}" for t in s["tp"])
        print(f"{label}:")
        print(
            line(
                f"  warm p50 ({len(s['warm'])} runs, {args.pause:g} s apart)",
                f"{p50(s['warm']):8.2f} ms",
            )
        )
        print(
            line(
                "  warm p90 / p99",
                f"{percentile(s['warm'], 90):8.2f} ms / {percentile(s['warm'], 99):.2f} ms",
            )
        )
        print(line("  warm p50, back to back", f"{p50(s['back']):8.2f} ms"))
        print(
            line(
                f"  runs/s, {args.workers} workers busy", f"{rate(name):8.1f}   (turns: {per_turn})"
            )
        )
        print(
            line(
                "  CPU per run: sandbox / pool",
                f"{cpu_ms(name, 'sandbox_cpu_s'):8.1f} ms / {cpu_ms(name, 'pool_cpu_s'):.1f} ms",
            )
        )
        faults = sum(t["faults"] for t in s["tp"]) / sum(t["runs"] for t in s["tp"])
        print(line("  page faults per run (zygote and runners)", f"{faults:8.0f}"))
        print(line("  zygote heap on 2 MiB pages", f"{huge[name]:8d} MiB"))
    now_warm = p50(samples["now"]["warm"])
    if cold:
        print(line("speed-up, this tree (cold p50 / warm p50)", f"{p50(cold) / now_warm:8.1f} x"))
    if args.device == "cuda":
        print(
            line(
                "warm p50 on CUDA (target <= 25 ms)",
                f"{now_warm:8.2f} ms  {'met' if now_warm <= 25 else 'MISSED'}",
            )
        )
        if cold:
            ok = p50(cold) / now_warm >= 100
            print(
                line(
                    "cold / warm on CUDA (target >= 100x)",
                    f"{p50(cold) / now_warm:8.1f} x  {'met' if ok else 'MISSED'}",
                )
            )
    if "base" in samples:
        ratio = rate("now") / rate("base")
        delta = now_warm - p50(samples["base"]["warm"])
        print(
            line(
                "runs/s, this tree / base (target >= 1.4x)",
                f"{ratio:8.2f} x  {'met' if ratio >= 1.4 else 'MISSED'}",
            )
        )
        print(
            line(
                "warm p50, this tree - base (target <= +1.5 ms)",
                f"{delta:+8.2f} ms  {'met' if delta <= 1.5 else 'MISSED'}",
            )
        )


if __name__ == "__main__":
    main()
