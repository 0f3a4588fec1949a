"""Every system call cmc treats apart from the rest, one row each: what cmc knows of
a call is read from its row, and the modules that act on calls derive their sets from
the rows (filter.py which calls are notified, calls/dispatch.py the handlers, calls/
quiet.py what folding may skip, proc/zygote.py what a kept start may make, proc/tasks.py
and proc/scheduler.py how a thread waits in one, calls/host.py the host's calls). A
call with no row runs natively, unseen, and means nothing to cmc.

The columns (rr declares its system calls so too, one entry per call, from which its
tables are generated):

- `notified` -- when the seccomp filter hands the call to cmc (filter.py): ALWAYS;
  FD, when a descriptor argument (`fds`: their positions) is cmc's, a virtual socket
  numbered from VFD_BASE (or 0 and 1, in a node whose stdin and stdout are cmc's);
  STATE, as FD, or when its first argument is a state fd (3 or 193: a write is a state
  line, a copy of one would let state escape cmc); SEGV, rt_sigaction of SIGSEGV made
  outside the trap page; FORK_ADVICE, madvise with MADV_DONTFORK or MADV_WIPEONFORK
  (what a copy of the process would lose: calls/memory.py); ENOSYS, refused by the
  filter itself; None: never.
- `disk` -- what a page cache (docs/target-contract.md, "The disk") adds: ALWAYS;
  FD3UP, through any descriptor from 3 up (a file of the node's is told apart in
  Python); MMAP, a shared writable mapping of a descriptor.
- `handler` -- "module.function" of calls/, resolved by calls/dispatch.py (this room
  cannot import calls/): a function `sys_*` there answers the call. Every call cmc may
  be notified of has one; every `sys_*` function is some row's (test_syscall_table.py).
- `quiet` -- for folding (calls/quiet.py): True, it never changes what another node or
  a property sees; False (the default), it may; UNLESS_OUTWARD, a write that shows
  unless to stdout, stderr, a pipe or an eventfd of the node; UNLESS_SOCKET, a close
  that shows for a virtual socket (its FIN); UNLESS_MADE, an open that shows with
  O_CREAT or O_TRUNC (its flags: `flags`).
- `start` -- whether a start kept as a zygote may make it (proc/zygote.py): START_ANY;
  START_EXEC, unless into the node's directory; START_THREAD, a clone of a thread;
  START_PATH, an open of a path outside the node's directory and /dev/shm, making and
  truncating nothing; START_REAL, on a real descriptor (bind of an AF_UNIX socket);
  START_EPOLL, an epoll instance's own descriptors; START_OWN, one of its own sockets
  bound to nothing, or an epoll instance; START_FLAGS, as START_OWN, or a read of a
  descriptor's flags; None: it ends the start.
- `sleeps` -- a native wait (proc/tasks.py): a thread asleep in it unnotified does not
  keep its node from being quiescent; ON_CHILD, a wait for a child's end (a vfork
  parent's, a copied tree's: proc/scheduler.py, proc/fork.py).
- `mask` -- a wait's signal-mask argument (as `flags`: -k, what argument k-1 points to):
  a thread asleep in it natively under a mask of its own is not copied (proc/fork.py).
- `restarts` -- False: interrupted by a signal whose handler runs, it fails with EINTR
  even under SA_RESTART (ERESTARTNOHAND: proc/scheduler.py).
- `on_socket` -- may block on a virtual socket of a connection or a listener: a thread
  held in it is told apart by which (proc/scheduler.py, `_blocked_on`).
- `vfork` -- its caller may wait, uninterruptibly, for the child it makes.
- `host` -- the host's (calls/host.py): REFUSED, never run; BY_PID, run when its first
  argument names a process of the node; CHECKED, its handler checks the ids it names.
- `why` -- what a refused call would do, which the refusal names.
- `paths` -- where its names are: (dirfd argument or None for the cwd, path argument)
  per name; `flags` -- an open's flags: an argument, or -k, what argument k-1 points to.
- `clock` -- a read of the clock: the argument its buffer is (a polled clock moves under
  time virtual: calls/dispatch.py).
- `alone` -- answered by the C helper for the one thread of a node that runs
  (linux/_native.py): ALONE_CLOCK, the clock read; ALONE_CONTINUE, with CONTINUE.

The filter tests the calls of each class in the table's order. The numbers come from
syscalls_x86_64.txt, which scripts/gen_syscalls.py writes from the kernel's headers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

NR: dict[str, int] = {}
for _line in resources.files(__package__).joinpath("syscalls_x86_64.txt").read_text(
        encoding="ascii").splitlines():
    if _line and not _line.startswith("#"):
        _name, _nr = _line.split()
        NR[_name] = int(_nr)
NAME = {nr: name for name, nr in NR.items()}

# notified (ALWAYS is also a `disk` value)
ALWAYS, FD, STATE, SEGV, ENOSYS = "always", "on a descriptor", "on a descriptor or state fd", \
    "SIGSEGV's action", "refused with ENOSYS"
FORK_ADVICE = "advice about fork"
# disk
FD3UP, MMAP = "on a descriptor from 3 up", "a shared writable mapping"
# quiet
UNLESS_OUTWARD, UNLESS_SOCKET, UNLESS_MADE = "unless a write out", "unless of a socket", \
    "unless it makes a name"
# start
START_ANY, START_EXEC, START_THREAD, START_PATH = "any", "not into the directory", \
    "a thread", "a path outside"
START_REAL, START_EPOLL, START_OWN, START_FLAGS = "a real descriptor", "an epoll's own", \
    "its own descriptor", "its own descriptor, or flags read"
# sleeps
NATIVE, ON_CHILD = "natively", "for a child"
# host
REFUSED, BY_PID, CHECKED = "refused", "by its pid", "checked"
# alone
ALONE_CLOCK, ALONE_CONTINUE = "clock", "continue"


@dataclass(frozen=True)
class Row:
    name: str
    notified: str | None = None
    handler: str | None = None
    fds: tuple[int, ...] = ()
    disk: str | None = None
    quiet: bool | str = False
    start: str | None = None
    sleeps: str | None = None
    restarts: bool = True
    mask: int | None = None
    on_socket: bool = False
    vfork: bool = False
    host: str | None = None
    why: str | None = None
    paths: tuple[tuple[int | None, int], ...] = ()
    flags: int | None = None
    clock: int | None = None
    alone: str | None = None
    nr: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "nr", NR[self.name])


def _host(name: str, why: str) -> Row:
    """A call that would act on the host: refused."""
    return Row(name, ALWAYS, "host.sys_host", host=REFUSED, why=why)


_MOUNTS, _CLOCK, _KEYS = "changes the host's mounts", "sets the host's clock", \
    "uses the host's kernel keyrings"
_UNSUPPORTED = "fds.sys_unsupported"
_NAME = "files.sys_name"

ROWS = (
    # -- notified always: sockets, exec, the clock and sleeps, waits on descriptors
    # (theirs are in memory), randomness, threads and processes made, the limits
    Row("socket", ALWAYS, "stream.sys_socket", quiet=True, start=START_ANY),
    Row("execve", ALWAYS, "threads.sys_execve", start=START_EXEC),
    Row("execveat", ALWAYS, "threads.sys_execve"),
    Row("clock_gettime", ALWAYS, "time.sys_clock_gettime", quiet=True, start=START_ANY, clock=1,
        alone=ALONE_CLOCK),
    Row("gettimeofday", ALWAYS, "time.sys_gettimeofday", quiet=True, start=START_ANY, clock=0),
    Row("time", ALWAYS, "time.sys_time", quiet=True, start=START_ANY, clock=0),
    Row("nanosleep", ALWAYS, "time.sys_nanosleep", quiet=True, start=START_ANY, restarts=False),
    Row("clock_nanosleep", ALWAYS, "time.sys_clock_nanosleep", quiet=True, start=START_ANY,
        restarts=False),
    Row("poll", ALWAYS, "waits.sys_poll", quiet=True, sleeps=NATIVE, restarts=False),
    Row("ppoll", ALWAYS, "waits.sys_ppoll", quiet=True, sleeps=NATIVE, restarts=False, mask=3),
    Row("select", ALWAYS, "waits.sys_select", quiet=True, sleeps=NATIVE, restarts=False),
    Row("pselect6", ALWAYS, "waits.sys_pselect6", quiet=True, sleeps=NATIVE, restarts=False,
        mask=-6),
    Row("epoll_wait", ALWAYS, "waits.sys_epoll_wait", quiet=True, sleeps=NATIVE, restarts=False),
    Row("epoll_pwait", ALWAYS, "waits.sys_epoll_wait", quiet=True, sleeps=NATIVE, restarts=False,
        mask=4),
    Row("epoll_pwait2", ALWAYS, "waits.sys_epoll_pwait2", quiet=True, sleeps=NATIVE,
        restarts=False, mask=4),
    Row("epoll_create", ALWAYS, "waits.sys_epoll_create", quiet=True, start=START_ANY),
    Row("epoll_create1", ALWAYS, "waits.sys_epoll_create", quiet=True, start=START_ANY),
    Row("getrandom", ALWAYS, "time.sys_getrandom", quiet=True, start=START_ANY),
    Row("clone", ALWAYS, "threads.sys_clone", start=START_THREAD, vfork=True),
    Row("clone3", ALWAYS, "threads.sys_clone", start=START_THREAD, vfork=True),
    Row("fork", ALWAYS, "threads.sys_fork"),
    Row("vfork", ALWAYS, "threads.sys_fork", vfork=True),
    Row("getrlimit", ALWAYS, "limits.sys_getrlimit", quiet=True, start=START_ANY),
    Row("setrlimit", ALWAYS, "limits.sys_setrlimit", start=START_ANY),
    Row("prlimit64", ALWAYS, "limits.sys_prlimit64", start=START_ANY),
    Row("close_range", ALWAYS, "limits.sys_close_range"),
    # opens: answered in C unless their path or flags say otherwise (filter.PASS_OPEN)
    Row("open", ALWAYS, "opens.sys_open", quiet=UNLESS_MADE, start=START_PATH,
        paths=((None, 0),), flags=1),
    Row("openat", ALWAYS, "opens.sys_open", quiet=UNLESS_MADE, start=START_PATH,
        paths=((0, 1),), flags=2),
    Row("openat2", ALWAYS, "opens.sys_open", paths=((0, 1),), flags=-3),
    # what threads wait and give way in, how one ends, and the first calls of a new
    # thread and its creator (cmc holds each there until the threads before it block)
    Row("futex", ALWAYS, "threads.sys_futex", quiet=True, start=START_ANY),
    Row("sched_yield", ALWAYS, "threads.sys_sched_yield", quiet=True, start=START_ANY),
    Row("exit", ALWAYS, "threads.sys_exit", start=START_ANY),
    Row("rt_sigprocmask", ALWAYS, "threads.sys_signal_setup", quiet=True, start=START_ANY,
        alone=ALONE_CONTINUE),
    Row("sigaltstack", ALWAYS, "threads.sys_signal_setup", quiet=True, start=START_ANY,
        alone=ALONE_CONTINUE),
    # leaving the node's process group, or its namespaces
    Row("setsid", ALWAYS, "threads.sys_setsid"),
    Row("setpgid", ALWAYS, "threads.sys_setpgid"),
    Row("ptrace", ALWAYS, "threads.sys_refused", why="traces a process"),
    Row("unshare", ALWAYS, "threads.sys_refused", why="leaves its namespaces"),
    Row("setns", ALWAYS, "threads.sys_refused", why="enters another namespace"),
    # names: a POSIX shared-memory object's is the world's (calls/shm.py)
    Row("unlink", ALWAYS, _NAME, paths=((None, 0),)),
    Row("unlinkat", ALWAYS, _NAME, paths=((0, 1),)),
    Row("link", ALWAYS, _NAME, paths=((None, 0), (None, 1))),
    Row("linkat", ALWAYS, _NAME, paths=((0, 1), (2, 3))),
    Row("rename", ALWAYS, _NAME, paths=((None, 0), (None, 1))),
    Row("renameat", ALWAYS, _NAME, paths=((0, 1), (2, 3))),
    Row("renameat2", ALWAYS, _NAME, paths=((0, 1), (2, 3))),
    # SysV IPC objects: refused where a node has no IPC namespace of its own; an
    # AF_UNIX name outside the node's directory: refused (calls/shm.py)
    Row("shmget", ALWAYS, "shm.sys_sysv_get"),
    Row("semget", ALWAYS, "shm.sys_sysv_get"),
    Row("msgget", ALWAYS, "shm.sys_sysv_get"),
    Row("bind", ALWAYS, "stream.sys_bind", fds=(0,), start=START_REAL),
    # the machine a node sees is the model's (calls/machine.py)
    Row("sched_getaffinity", ALWAYS, "machine.sys_sched_getaffinity", start=START_ANY),
    Row("sched_setaffinity", ALWAYS, "machine.sys_sched_setaffinity"),
    Row("getcpu", ALWAYS, "machine.sys_getcpu", start=START_ANY),
    Row("sysinfo", ALWAYS, "machine.sys_sysinfo", start=START_ANY),
    Row("uname", ALWAYS, "machine.sys_uname", start=START_ANY),
    # the figures of its state too: free space and CPU time (calls/figures.py)
    Row("statfs", ALWAYS, "figures.sys_statfs", quiet=True),
    Row("fstatfs", ALWAYS, "figures.sys_fstatfs", quiet=True),
    Row("getrusage", ALWAYS, "figures.sys_getrusage", quiet=True, start=START_ANY),
    Row("times", ALWAYS, "figures.sys_times", quiet=True, start=START_ANY),
    # a copy of a process tree: its first process knows itself by the original's pid
    Row("getpid", ALWAYS, "host.sys_getpid", quiet=True, start=START_ANY),
    Row("getppid", ALWAYS, "host.sys_getpid", quiet=True, start=START_ANY),

    # -- what would act on the host (calls/host.py; docs/target-contract.md)
    _host("bpf", "loads programs or maps into the host's kernel"),
    _host("perf_event_open", "watches the host's CPUs and processes"),
    _host("userfaultfd", "handles page faults outside cmc's sight"),
    _host("mount", _MOUNTS), _host("umount2", _MOUNTS),
    _host("pivot_root", _MOUNTS), _host("chroot", "changes the root of the host's files"),
    _host("fsopen", _MOUNTS), _host("fsmount", _MOUNTS), _host("fsconfig", _MOUNTS),
    _host("move_mount", _MOUNTS), _host("open_tree", _MOUNTS), _host("fspick", _MOUNTS),
    _host("mount_setattr", _MOUNTS),
    _host("kexec_load", "loads a new kernel"), _host("kexec_file_load", "loads a new kernel"),
    _host("init_module", "loads a kernel module"), _host("finit_module", "loads a kernel module"),
    _host("delete_module", "removes a kernel module"),
    _host("create_module", "loads a kernel module"),
    _host("reboot", "restarts the host"), _host("swapon", "changes the host's swap"),
    _host("swapoff", "changes the host's swap"),
    _host("settimeofday", _CLOCK), _host("clock_settime", _CLOCK),
    _host("clock_adjtime", "reads or steers the host's clock"),
    _host("adjtimex", "reads or steers the host's clock"),
    _host("sethostname", "renames the host"), _host("setdomainname", "renames the host"),
    _host("keyctl", _KEYS), _host("add_key", _KEYS), _host("request_key", _KEYS),
    _host("acct", "turns on the host's process accounting"),
    _host("quotactl", "changes the host's quotas"),
    _host("quotactl_fd", "changes the host's quotas"),
    _host("iopl", "reaches the host's I/O ports"), _host("ioperm", "reaches the host's I/O ports"),
    _host("syslog", "reads the host's kernel log"),
    _host("lookup_dcookie", "reads the host's kernel state"),
    _host("vhangup", "hangs up the host's terminal"),
    _host("fanotify_init", "watches the host's files"),
    _host("open_by_handle_at", "opens a file by handle, past the node's directory"),
    _host("name_to_handle_at", "takes a file handle of the host's"),
    _host("nfsservctl", "controls the host's NFS server"),
    _host("uselib", "loads a library the old way"),
    _host("get_kernel_syms", "reads the host's kernel state"),
    _host("query_module", "reads the host's kernel state"),
    _host("_sysctl", "changes the host's kernel settings"),
    _host("ustat", "reads the host's file systems"),
    _host("process_madvise", "acts on another process's memory"),
    _host("migrate_pages", "moves another process's memory"),
    _host("move_pages", "moves another process's memory"),
    Row("kill", ALWAYS, "host.sys_kill", host=CHECKED),
    Row("tkill", ALWAYS, "host.sys_tkill", host=CHECKED),
    Row("tgkill", ALWAYS, "host.sys_tkill", host=CHECKED),
    Row("pidfd_open", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("process_vm_readv", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("process_vm_writev", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("rt_sigqueueinfo", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("sched_setscheduler", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("sched_setparam", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("sched_setattr", ALWAYS, "host.sys_by_pid", host=BY_PID),
    Row("setpriority", ALWAYS, "host.sys_priority", host=CHECKED),
    Row("ioprio_set", ALWAYS, "host.sys_priority", host=CHECKED),

    # -- io_uring would be a way around every interception
    Row("io_uring_setup", ENOSYS), Row("io_uring_enter", ENOSYS),
    Row("io_uring_register", ENOSYS),
    # -- the handler that makes rdtsc cmc's takes SIGSEGV: the program's own action is
    # kept by cmc (calls/tsc.py)
    Row("rt_sigaction", SEGV, "tsc.sys_rt_sigaction", start=START_ANY),
    # -- memory a fork would not copy: a copy of the process is made by a fork
    Row("madvise", FORK_ADVICE, "memory.sys_madvise", quiet=True, start=START_ANY),

    # -- with a page cache only: what makes a file durable, truncates or extends one,
    # makes or removes a name; msync, and a shared writable mapping of a file (what is
    # stored through it is unsynced until msync(MS_SYNC) or an fsync: world/disk.py)
    Row("sync_file_range", handler="files.sys_sync_file_range", disk=ALWAYS),
    Row("syncfs", handler="files.sys_sync", disk=ALWAYS),
    Row("sync", handler="files.sys_sync", disk=ALWAYS),
    Row("truncate", handler="files.sys_truncate", disk=ALWAYS),
    Row("creat", handler="files.sys_creat", disk=ALWAYS),
    Row("fallocate", handler="files.sys_fallocate", disk=ALWAYS),
    Row("symlink", handler=_NAME, disk=ALWAYS),
    Row("symlinkat", handler=_NAME, disk=ALWAYS),
    Row("mkdir", handler=_NAME, disk=ALWAYS),
    Row("mkdirat", handler=_NAME, disk=ALWAYS),
    Row("rmdir", handler=_NAME, disk=ALWAYS),
    Row("mknod", handler=_NAME, disk=ALWAYS),
    Row("mknodat", handler=_NAME, disk=ALWAYS),
    Row("msync", handler="files.sys_msync", disk=ALWAYS),
    Row("mmap", handler="files.sys_mmap", disk=MMAP),

    # -- on a virtual socket (or, in a node whose stdio is cmc's, on fd 0 or 1)
    Row("read", FD, "stream.sys_read", fds=(0,), quiet=True, sleeps=NATIVE, on_socket=True),
    Row("close", FD, "fds.sys_close", fds=(0,), quiet=UNLESS_SOCKET, start=START_OWN),
    Row("fstat", FD, "fds.sys_fstat", fds=(0,), quiet=True),
    Row("lseek", FD, "fds.sys_espipe", fds=(0,), quiet=True),
    Row("ioctl", FD, "fds.sys_ioctl", fds=(0,), quiet=True, start=START_OWN),
    Row("pread64", FD, "fds.sys_espipe", fds=(0,), quiet=True, sleeps=NATIVE),
    Row("readv", FD, "stream.sys_readv", fds=(0,), quiet=True, sleeps=NATIVE, on_socket=True),
    Row("preadv", FD, "fds.sys_espipe", fds=(0,), quiet=True),
    Row("preadv2", FD, "fds.sys_espipe", fds=(0,), quiet=True),
    Row("sendto", FD, "stream.sys_sendto", fds=(0,), on_socket=True),
    Row("recvfrom", FD, "stream.sys_receive_from", fds=(0,), quiet=True, sleeps=NATIVE,
        on_socket=True),
    Row("sendmsg", FD, "stream.sys_sendmsg", fds=(0,), on_socket=True),
    Row("recvmsg", FD, "stream.sys_recvmsg", fds=(0,), quiet=True, sleeps=NATIVE,
        on_socket=True),
    Row("sendmmsg", FD, "stream.sys_sendmmsg", fds=(0,), on_socket=True),
    Row("recvmmsg", FD, "stream.sys_recvmmsg", fds=(0,), quiet=True, sleeps=NATIVE,
        on_socket=True),
    Row("shutdown", FD, "stream.sys_shutdown", fds=(0,)),
    Row("listen", FD, "stream.sys_listen", fds=(0,)),
    Row("accept", FD, "stream.sys_accept", fds=(0,), quiet=True, sleeps=NATIVE, on_socket=True),
    Row("accept4", FD, "stream.sys_accept", fds=(0,), quiet=True, sleeps=NATIVE, on_socket=True),
    Row("connect", FD, "stream.sys_connect", fds=(0,), on_socket=True),
    Row("getsockname", FD, "stream.sys_getsockname", fds=(0,), quiet=True, start=START_OWN),
    Row("getpeername", FD, "stream.sys_getpeername", fds=(0,), quiet=True),
    Row("setsockopt", FD, "sockopts.sys_setsockopt", fds=(0,), quiet=True, start=START_OWN),
    Row("getsockopt", FD, "sockopts.sys_getsockopt", fds=(0,), quiet=True, start=START_OWN),
    Row("fsync", FD, "files.sys_fsync", fds=(0,), disk=ALWAYS),
    Row("fdatasync", FD, "files.sys_fsync", fds=(0,), disk=ALWAYS),
    Row("ftruncate", FD, "files.sys_ftruncate", fds=(0,), disk=ALWAYS),
    Row("flock", FD, "fds.sys_einval", fds=(0,), quiet=True, sleeps=NATIVE),
    Row("fchdir", FD, "fds.sys_einval", fds=(0,), quiet=True),
    Row("fchmod", FD, _UNSUPPORTED, fds=(0,)),
    Row("fchown", FD, _UNSUPPORTED, fds=(0,)),
    Row("getdents64", FD, "fds.sys_einval", fds=(0,), quiet=True),
    Row("newfstatat", FD, "fds.sys_newfstatat", fds=(0,), quiet=True),
    Row("statx", FD, _UNSUPPORTED, fds=(0,)),
    Row("splice", FD, "files.sys_copy_into", fds=(0,), disk=ALWAYS),
    Row("tee", FD, _UNSUPPORTED, fds=(0,)),
    Row("copy_file_range", FD, "files.sys_copy_into", fds=(0,), disk=ALWAYS),
    # ... or on a state fd: a write is a state line; a copy of a state fd is refused
    Row("write", STATE, "writes.sys_write", fds=(0,), disk=FD3UP, quiet=UNLESS_OUTWARD,
        on_socket=True),
    Row("writev", STATE, "writes.sys_writev", fds=(0,), disk=FD3UP, quiet=UNLESS_OUTWARD,
        on_socket=True),
    Row("pwrite64", STATE, "writes.sys_write", fds=(0,), disk=FD3UP, quiet=UNLESS_OUTWARD),
    Row("pwritev", STATE, "writes.sys_writev", fds=(0,), disk=FD3UP, quiet=UNLESS_OUTWARD),
    Row("pwritev2", STATE, "writes.sys_writev", fds=(0,), disk=FD3UP, quiet=UNLESS_OUTWARD),
    Row("fcntl", STATE, "fds.sys_fcntl", fds=(0,), quiet=True, start=START_FLAGS),
    Row("dup", STATE, "fds.sys_dup", fds=(0,), quiet=True),
    Row("dup2", STATE, "fds.sys_dup2", fds=(0, 1), quiet=True),
    Row("dup3", STATE, "fds.sys_dup2", fds=(0, 1), quiet=True),
    Row("sendfile", FD, "files.sys_copy_into", fds=(0, 1), disk=ALWAYS),
    Row("epoll_ctl", FD, "waits.sys_epoll_ctl", fds=(2,), quiet=True, start=START_EPOLL),

    # -- never notified: native waits, which another thread of the node may end
    Row("pause", sleeps=NATIVE, restarts=False),
    Row("rt_sigsuspend", sleeps=NATIVE),
    Row("rt_sigtimedwait", sleeps=NATIVE),
    Row("wait4", sleeps=ON_CHILD),
    Row("waitid", sleeps=ON_CHILD),
    # (a kept start may read a clock's resolution: not notified, it is not seen)
    Row("clock_getres", start=START_ANY),
)

ROW = {row.nr: row for row in ROWS}
if len(ROW) != len(ROWS):
    raise AssertionError("a system call with two rows")


def nrs(test) -> frozenset[int]:
    """The numbers of the calls whose row passes `test`."""
    return frozenset(row.nr for row in ROWS if test(row))
