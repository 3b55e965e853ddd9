"""The syscalls the runner's filters name, and the argument values they refuse: data only.

`ALLOWED` is the allow-list (any other call fails with ENOSYS), `REFUSED` the calls refused with
EPERM whatever their arguments; the rest are the values of arguments the refusals compare
(prctl options, fcntl commands, socket families, types and protocols, advice, flags). Why each
is refused is said here, next to it, and in `sandbox.seccomp`, which turns these into the two
filters (`_allow_list`, `_refusals`) and loads them.

Runs in: the zygote (read once, when `sandbox.seccomp.prepare` compiles the filters).
"""

from __future__ import annotations

ALLOWED = (
    # files and folders
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "open", "openat", "creat", "close", "close_range", "lseek", "stat", "fstat", "lstat",
    "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink",
    "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask",
    "truncate", "ftruncate", "fallocate", "fadvise64", "readahead", "fsync", "fdatasync",
    "sync_file_range", "flock", "fcntl", "dup", "dup2", "dup3", "ioctl", "mknod", "mknodat",
    "utime", "utimes", "utimensat", "futimesat", "getxattr", "lgetxattr", "fgetxattr", "setxattr",
    "lsetxattr", "fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
    "fremovexattr", "copy_file_range", "sendfile", "splice", "tee", "vmsplice",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock", "mlock2",
    "munlock", "mlockall", "munlockall", "membarrier", "memfd_create", "remap_file_pages",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "shmget", "shmat", "shmdt", "shmctl", "semget",
    "semop", "semtimedop", "semctl",
    # where its own memory lives on a NUMA host (CUDA's and OpenMP's libraries ask; it moves no
    # other process's pages without a capability the runner lacks)
    "get_mempolicy", "set_mempolicy", "mbind",
    # processes and threads (`clone` and `prctl` have argument rules in the refusals; `clone3`
    # is listed so that its ENOSYS there stands, the answer libc falls back on)
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
    "kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal", "getpid", "getppid", "gettid",
    "getpgid", "getpgrp", "setpgid", "getsid", "setsid", "getuid", "geteuid", "getgid", "getegid",
    "getresuid", "getresgid", "getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid", "setgroups", "setfsuid", "setfsgid", "capget", "capset", "prctl", "arch_prctl",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
    "sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "getpriority",
    "setpriority", "ioprio_get", "ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage",
    "times", "getcpu", "uname", "sysinfo", "seccomp",
    # signals, time, waiting
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
    "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "signalfd",
    "signalfd4", "pause", "alarm", "getitimer", "setitimer", "nanosleep", "clock_nanosleep",
    "clock_gettime", "clock_getres", "gettimeofday", "time", "timer_create", "timer_settime",
    "timer_gettime", "timer_getoverrun", "timer_delete", "timerfd_create", "timerfd_settime",
    "timerfd_gettime", "restart_syscall", "getrandom",
    # waiting on descriptors, pipes, events
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
    # sockets (families and protocols narrowed in the refusals; the run has no network anyway)
    "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname",
    "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg",
    "sendmmsg", "recvmmsg", "shutdown",
)  # fmt: skip
"""Every call a runner may make (see `sandbox.seccomp`); anything else fails with ENOSYS."""

REFUSED = (
    "setns",
    # mounts, old and new API
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # kernel keyrings
    "add_key", "request_key", "keyctl",
    # io_uring, userfaultfd, bpf, perf events
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf", "perf_event_open",
    # native AIO: one run could take the host's whole aio-max-nr (databases use it)
    "io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_cancel", "io_destroy",
    # watching files: a run saw which files other runs and the host opened in shared folders
    "inotify_init", "inotify_init1",
    # other processes' memory and descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    # the kernel itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "syslog",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "lookup_dcookie",
    "open_by_handle_at", "fanotify_init",
)  # fmt: skip
"""Refused with EPERM whatever their arguments."""

REFUSED_PRCTL = {
    "PR_SET_PDEATHSIG": 1,  # the runner dies with the zygote: clearing it left a run alive after the server
    "PR_SET_DUMPABLE": 4,  # a dumpable runner's crash sent its memory to a host's core handler (a pipe
    # in core_pattern runs as host root and ignores RLIMIT_CORE); after its setuid a runner is not
}
"""prctl(option, ...) refused for these options (compared as the int the kernel reads)."""

ALLOWED_SOCKET_FAMILIES = (1, 2, 10)
"""AF_UNIX, AF_INET, AF_INET6: the network namespace leaves only loopback to them anyway."""

ALLOWED_IP_SOCKET_TYPES = (1, 2)
"""SOCK_STREAM and SOCK_DGRAM: what TCP and UDP are made as (see `seccomp._refusals`)."""

ALLOWED_IP_PROTOCOLS = (0, 6, 17)
"""socket(AF_INET or AF_INET6, type, protocol): the default, TCP and UDP. Any other (MPTCP, SCTP,
…) reaches code a run has no need of; on a kernel with modules, an unknown one has the host load
one, as root."""

REFUSED_FCNTL = {
    "F_SETLEASE": 1024,  # a lease on a shared read-only file made other runs' opens wait on this one
    "F_NOTIFY": 1026,  # directory notifications: like inotify, which files other runs and the host read
}
"""fcntl(fd, cmd, ...) refused for these commands."""

POSIX_FADV_DONTNEED = 4
F_SETFL = 4
RWF_NOWAIT = 0x8
READ_AHEAD_HINTS = {"SEQUENTIAL": 2, "WILLNEED": 3}
"""posix_fadvise and madvise advice (the same numbers in both) that asks the kernel to read ahead
on the caller's behalf: answered "done" and left undone (see `seccomp._refusals`)."""

MS_SYNC = 4
"""msync's flag that writes a shared mapping's file out and flushes it (see `seccomp._refusals`)."""

REFUSED_IOCTL_RANGES = (0x8900, 0x8B00)
"""ioctl(fd, request, ...) refused for the 256 requests from each (see `seccomp._refusals`)."""

RLIMIT_CORE = 4
"""Its resource number: a run may read the limit, never set it. Lowered to 0 (it is 1), a crash
would pipe its memory to the host's core handler (see `isolation.no_core_dumps`)."""
