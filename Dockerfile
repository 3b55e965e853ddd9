# ampquiz images, two targets from one file:
#
#   docker build -t ampquiz .                        the web (the default target): SQLite under
#                                                    /srv/ampquiz/var and a local sandbox pool, or
#                                                    remote workers with AMPQUIZ_WORKERS_URL=nats://…
#   docker build --target worker -t ampquiz-worker . a sandbox worker (`ampquiz worker`) for GPU or
#                                                    CPU hosts: torch, NATS and the sandbox only, no
#                                                    web stack
#
# compose.yaml next to this file runs the whole scaled-out shape (web, worker, NATS, PostgreSQL).
#
# The sandbox gives each run Linux namespaces, an allow-listed root it pivots into, a cgroup and a
# syscall filter of its own. Run whichever container runs snippets (the web on its embedded
# defaults, or a worker) with the seccomp profile next to this file:
#
#   docker run --cap-add SYS_ADMIN --security-opt seccomp=seccomp.json -p 8000:8000 ampquiz
#
# Capabilities the sandbox needs beyond Docker's defaults:
#   SYS_ADMIN   new namespaces (unshare, setns), the mounts of each run's root, and pivot_root into
#               it. Only the server's own processes hold it: a run drops every capability (a uid of
#               its own, no_new_privs) and its filter refuses namespaces and mounts outright.
#   SYS_PTRACE  optional: lets the pool read how a run ended as soon as it starts exiting (about 3 ms
#               sooner per run); without it the pool waits for the zygote to reap the runner.
# and, of Docker's defaults, SETUID and SETGID (a uid per run), CHOWN (its work folder) and KILL
# (ending runs, which run as other uids). A web container with AMPQUIZ_WORKERS_URL set runs no
# snippet and needs none of this.
#
# seccomp.json is Docker's default profile with pivot_root added to what CAP_SYS_ADMIN allows,
# io_uring removed, and ptrace and its kin allowed only with CAP_SYS_PTRACE; never run with
# `seccomp=unconfined`. Hosts with AppArmor also apply Docker's AppArmor profile, which refuses every
# mount: there add `--security-opt apparmor=unconfined` (or a profile allowing mount, umount and
# pivot_root). The per-run memory, process and CPU caps need a cgroup tree the container may write
# (cgroup v2: `--cgroupns=private` and a writable /sys/fs/cgroup). Whatever the host refuses, runs go
# on with the rest, and the pool logs at start which protections are off.
#
# It stays root so that each run can be given a private uid of its own; snippets never run as root.
FROM python:3.11-slim AS base

# libseccomp compiles each runner's syscall filter (sandbox/seccomp.py binds it with ctypes).
RUN apt-get update && apt-get install -y --no-install-recommends libseccomp2 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/ampquiz
COPY pyproject.toml constraints.txt README.md ./
COPY app app
COPY sandbox sandbox

# A sandbox host: what `ampquiz worker` imports, and nothing of the web. constraints.txt pins the
# CPU build of torch 2.13.0; on a GPU host, build FROM an image with your CUDA build of torch and
# drop the pin.
FROM base AS worker
RUN pip install --no-cache-dir -c constraints.txt torch numpy nats-py pydantic PyYAML uvloop \
    && pip install --no-cache-dir --no-deps .
CMD ["ampquiz", "worker"]

# The web (the default target: last in the file).
FROM base AS web
COPY questions questions
RUN pip install --no-cache-dir -c constraints.txt ".[postgres]"
ENV AMPQUIZ_HOST=0.0.0.0 AMPQUIZ_PORT=8000
VOLUME /srv/ampquiz/var
EXPOSE 8000
CMD ["ampquiz", "serve"]
