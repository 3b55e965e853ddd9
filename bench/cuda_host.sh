#!/usr/bin/env bash
# Issue 19's checks on a CUDA host, in one go, each step's log in one folder (default ./cuda-host):
#   host.txt     the GPU, driver, torch, cgroups and /dev/nvidia* this host has
#   steps.txt    bench/cuda_runner_steps.py: which of a runner's steps, if any, breaks CUDA
#   smoke.txt    one pool, one CUDA run, the environment and protections it reports
#   gpu-tests.txt  pytest -m gpu (tests/sandbox/test_gpu.py and the CUDA autocast lists)
#   verify.txt   `ampquiz verify --record` on CUDA; the record lands in questions/verified/
#   witness.txt  every key against the explained run learners are shown (the live server holds
#                back a key that run contradicts: on CUDA too, explaining must not change output)
#   bench.txt    bench/sandbox_latency.py --device cuda
#   sandbox-tests.txt  the sandbox suite (not -m gpu) on a CUDA host, if time is left
# Usage: bash bench/cuda_host.sh [LOG_DIR] [SECONDS]   (SECONDS: the whole budget, default 480)
#   STEPS="host verify bench" runs only the steps named (default: all, in the order above)
set -u
out=${1:-cuda-host}
budget=${2:-480}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
end=$((SECONDS + budget))
step() {  # step NAME MAX_SECONDS COMMAND...: runs it with what is left of the budget, at most MAX
  local name=$1 max=$2; shift 2
  [[ " ${STEPS:-$name} " == *" $name "* ]] || return 0
  local left=$((end - SECONDS))
  ((left < max)) && max=$left
  if ((max < 10)); then echo "skipped: no time left" >"$out/$name.txt"; return; fi
  echo "== $name (up to ${max}s)"
  local t=$SECONDS
  timeout -k 5 "$max" "$@" >"$out/$name.txt" 2>&1
  echo "== $name: exit $? after $((SECONDS - t))s" | tee -a "$out/$name.txt"
}
HOST='date -u; uname -r; id; nproc; nvidia-smi;
  "$py" -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())"; ls -l /dev/nvidia* /dev/dri; mount | grep -E "cgroup|nvidia";
  cat /proc/self/cgroup; ls /sys/fs/cgroup | head -40; env | grep -E "LD_LIBRARY|CUDA|NVIDIA";
  ldconfig -p | grep -E "libcuda|libseccomp|libnvidia-ml"; own=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup);
  for d in /sys/fs/cgroup $(dirname $own) $own; do echo "$d: $(cat $d/cgroup.controllers) | $(cat $d/cgroup.subtree_control)"; done'
SMOKE='
from sandbox import Sandbox
with Sandbox(workers=1) as sb:
    print(sb.environment)
    import glob
    print("zygote threads:", [open(t + "/comm").read().strip() for t in glob.glob(f"/proc/{sb.zygote.pid}/task/*")])
    r = sb.run("import torch\nprint(torch.ones(2, device=\"cuda\").sum().item(), torch.cuda.get_device_name())", device="cuda")
    print(r.status, repr(r.stdout), r.environment, r.exception, r.message, r.stderr[-3000:], sep="\n")
    import time  # where the time of a warm run goes: the whole call against the snippet alone
    code = "import torch\nx = torch.randn(8, 8, device=\"cuda\")\nwith torch.autocast(\"cuda\"):\n    print(torch.nn.functional.linear(x, x).dtype)"
    for _ in range(8):
        time.sleep(1.5)
        t = time.perf_counter()
        r = sb.run(code, device="cuda")
        print(f"warm run: {(time.perf_counter() - t) * 1000:.1f} ms in all, the snippet {r.duration_ms:.1f} ms, {r.status} {r.stdout.strip()}")
    # Which of those ops costs the time in a prepared runner (each first use, then again)
    ops = [("randn", "torch.randn(8, 8, device=dev)"), ("linear", "F.linear(x, x)"),
           ("autocast linear", "ac(F.linear, x, x)"), ("sum().item()", "x.sum().item()"),
           ("softmax", "x.softmax(-1)"), ("print(dtype)", "str(x.dtype)")]
    timed = "import time, torch\nimport torch.nn.functional as F\ndev = \"cuda\"\nx = torch.ones(8, 8, device=dev)\n"
    timed += "def ac(f, *a):\n    with torch.autocast(dev):\n        return f(*a)\n"
    timed += "def t(label, f):\n    torch.cuda.synchronize(); s = time.perf_counter(); f(); torch.cuda.synchronize()\n"
    timed += "    print(label, round((time.perf_counter() - s) * 1000, 2), \"ms\")\n"
    for label, op in ops * 2:
        timed += f"t({label!r}, lambda: {op})\n"
    time.sleep(1.5)
    r = sb.run(timed, device="cuda")
    print("first use, then again, in a prepared runner:", r.status, r.message, r.stdout, sep="\n")
'
export py
step host 30 bash -c "$HOST"
step steps 150 "$py" bench/cuda_runner_steps.py
step smoke 60 "$py" -c "$SMOKE"
step gpu-tests 130 "$py" -m pytest -m gpu -rA -p no:cacheprovider tests/sandbox/test_gpu.py tests/sandbox/explain/test_cuda_autocast_lists.py
step verify 130 "$py" -m app.cli verify --jobs 12 --record
step witness 120 "$py" -m pytest -q -p no:cacheprovider "tests/questions/test_bank.py::test_every_key_agrees_with_the_run_learners_are_shown"
step bench 150 "$py" bench/sandbox_latency.py --device cuda --workers 4 --rounds 2 --seconds 3 --warm 20 --cold 3
# What a CUDA host changes for the rest of the sandbox: its cgroup caps, the zygote's threads.
step sandbox-tests 300 "$py" -m pytest -m "not gpu" -q -p no:cacheprovider ${SANDBOX_TESTS:-tests/sandbox/test_leftovers_and_cpu.py \
  tests/sandbox/test_isolation.py tests/sandbox/test_run_result.py::test_the_zygote_stays_single_threaded_after_its_warm_up \
  tests/sandbox/test_syscall_filter.py tests/sandbox/test_hostile_channels.py}
