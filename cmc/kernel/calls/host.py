"""Nothing a node does acts on the host (docs/target-contract.md, "Calls that would act
on the host"): the calls that reach past a node's own processes and files -- the kernel's
state, the host's clock, mounts, modules, keyrings, other processes -- are refused with
exit 3 naming node, call and arguments, never run natively; those that name a process
run only when it is one of the node's. Which calls are which: their rows' `host` and
`why` (linux/syscalls.py)."""
from __future__ import annotations

import errno
import os
import signal

from ...errors import NotForkable
from ..linux import _native, procfs
from ..linux.syscalls import NR, ROW
from .answer import CONTINUE, Err, Ret
from .handler import signed, unsupported

PRIO_PROCESS, PRIO_PGRP, PRIO_USER = 0, 1, 2
IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP, IOPRIO_WHO_USER = 1, 2, 3


def _groups(call) -> set[int]:
    tasks = call.node.tasks
    return {tasks.pgid, *tasks.groups}


def _kept_start(call, pid: int) -> bool:
    """Whether pid is a process or thread of a start kept as a zygote (proc/zygote.py),
    which is alive for cmc but no program's: to a node it is a pid no process has (as
    a launch's pid is, once it ended)."""
    roots = call.node.setting.roots
    zygotes = roots.zygotes if roots is not None else None
    return zygotes is not None and zygotes.holds(pid)


def _node_pid(call, pid: int) -> bool | None:
    """Whether pid (> 0) is a process or thread of the node: cmc has seen it, or it is
    in one of the node's process groups (a child not seen yet). None: no such pid."""
    tasks = call.node.tasks
    if pid in tasks.procs or pid in tasks.threads:
        return True
    if _kept_start(call, pid):
        return None
    _ended()
    try:
        return os.getpgid(pid) in _groups(call)
    except ProcessLookupError:
        return None
    except OSError:
        return False


def _ended() -> None:
    """Before the kernel is asked about a pid that is not the node's: every process
    cmc killed is reaped (the C helper reaps them on its own, _native.bury), so that a
    pid of an ended incarnation names no process, as it did once cmc killed it."""
    _native.buried(10.0)


def _refuse(call, what: str):
    return unsupported(call, call.nr, call.args, f"{what} (refused: nothing a node does "
                       "acts on the host)", first_is_fd=False)


def sys_host(call):
    """A call its row refuses (linux/syscalls.py: `host`, and `why`, what it would act on)."""
    return _refuse(call, ROW[call.nr].why)


def _alone(call) -> bool:
    """`machine pids private`, or a copy of a process tree: every process or group the
    node can name is its own (its PID namespace holds its processes only), so no id
    needs checking."""
    return call.node.own_pids or call.node.tasks.ns_root


# -- a copy of a process tree (proc/fork.py): its first process is process 1 of a PID
# namespace; the program knows it by the original's pid, and it is an init, which the
# kernel lets no signal without a handler reach (docs/design.md, "Copies of process
# trees"). A copy of a kept start (proc/zygote.py) is known by the kept start's pid too,
# in no namespace of its own.
def sys_getpid(call):
    """The first process of a copied tree or of a start's copy asks its pid (1 in its
    namespace, or its own) or its parent's, its children their parent's: the
    original's."""
    tasks = call.node.tasks
    if not tasks.root_known:
        return CONTINUE
    root = call.proc.pid == tasks.pid
    if call.nr == NR["getpid"]:
        return Ret(tasks.root_known) if root else CONTINUE
    if root:
        return Ret(tasks.parent_known)
    main = tasks.procs.get(tasks.pid)
    if main is not None and call.proc.parent == main.number:
        return Ret(tasks.root_known)
    return CONTINUE


# signals whose default action is to ignore them (or to continue): an init's too
_DEFAULT_IGNORED = frozenset((signal.SIGCHLD, signal.SIGURG, signal.SIGWINCH, signal.SIGCONT))


def _to_copied_root(call, pid: int, sig: int):
    """kill() of the first process of a copy by its original's pid (or its group's):
    sent by cmc to the copy. A signal the first process of a copied tree neither
    catches nor ignores would end the original but not an init: that world is replayed
    instead."""
    tasks = call.node.tasks
    root = tasks.pid
    if tasks.ns_root and sig and sig not in _DEFAULT_IGNORED and sig != signal.SIGKILL:
        caught = procfs.signal_mask(root, "SigCgt") | procfs.signal_mask(root, "SigIgn")
        if not caught & (1 << (sig - 1)):
            raise NotForkable(f"node {call.node.name}: signal {sig} to the first process "
                              "of a copied process tree, which would end the original")
    try:
        if pid <= 0:
            os.killpg(tasks.pgid, sig)
        else:
            os.kill(root, sig)
    except OSError as e:
        return Err(e.errno)
    return Ret(0)


def _check_pid(call, pid: int, what: str):
    """CONTINUE when pid (0: the caller) is the node's, ESRCH when there is none, else
    the refusal."""
    if pid == 0 or _alone(call):
        return CONTINUE
    mine = _node_pid(call, pid) if pid > 0 else None
    if mine is None and pid > 0:
        return Err(errno.ESRCH)
    return CONTINUE if mine else _refuse(call, f"{what} process {pid}, which is not the node's")


def sys_by_pid(call):
    """A call whose first argument names a process: run when it is the node's."""
    return _check_pid(call, signed(call.args[0]), "acts on")


def sys_kill(call):
    """kill(pid, sig): a process of the node, its own group (0), or a group of the
    node's (-pgid); never every process the caller may signal (-1) or one outside."""
    call.node.tasks.signalled = True     # a parent parked in wait4 may wake (scheduler)
    pid = signed(call.args[0])
    known = call.node.tasks.root_known
    if known and (pid in (known, -known) or pid == 0 and call.node.tasks.ns_root):
        return _to_copied_root(call, pid, call.args[1] & 0xFFFFFFFF)
    if known and pid == -1:
        return _refuse(call, "signals every process it may (pid -1)")
    if _alone(call):
        return CONTINUE          # -1 too: every process of its namespace, the node's
    if pid == -1:
        return _refuse(call, "signals every process it may (pid -1)")
    if pid < -1:
        if -pid in _groups(call):
            return CONTINUE
        if _kept_start(call, -pid):
            return Err(errno.ESRCH)
        _ended()
        try:
            os.killpg(-pid, 0)
        except ProcessLookupError:
            return Err(errno.ESRCH)
        except OSError:
            pass
        return _refuse(call, f"signals process group {-pid}, which is not the node's")
    return _check_pid(call, pid, "signals")


def sys_priority(call):
    """A priority of the node's own processes or groups only; never a user's (every
    process of that user on the host)."""
    which, who = signed(call.args[0]), signed(call.args[1])
    user = PRIO_USER if call.nr == NR["setpriority"] else IOPRIO_WHO_USER
    group = PRIO_PGRP if call.nr == NR["setpriority"] else IOPRIO_WHO_PGRP
    if which == user:
        return _refuse(call, "changes the priority of every process of a user")
    if which == group:
        return CONTINUE if who == 0 or _alone(call) or who in _groups(call) else \
            _refuse(call, f"changes the priority of process group {who}, which is not the node's")
    return _check_pid(call, who, "changes the priority of")


def sys_tkill(call):
    """A thread signalled by the id its program knows it by. In a copy of a world a
    thread has a new id from the kernel (proc/fork.py), while the program keeps the
    original's (Go's runtime caches it to preempt a thread, glibc to pthread_kill it):
    cmc signals the copy's thread in its stead; so too when the process is named by the
    pid a copied tree's root was answered (`getpid`: the original's). Any other id goes
    to the kernel as is."""
    call.node.tasks.signalled = True
    args = call.args
    tgid, tid, sig = ((signed(args[0]), signed(args[1]), args[2]) if call.nr == NR["tgkill"]
                      else (None, signed(args[0]), args[1]))
    t = call.node.tasks.known_thread(tid)
    if t is None and _kept_start(call, tid):
        return Err(errno.ESRCH)
    if t is None:
        _ended()
    if t is None or t.tid == tid and tgid in (None, t.proc.pid):
        return CONTINUE
    if tgid is not None and tgid not in call.node.tasks.known_pids(t.proc):
        return CONTINUE
    try:
        _native.tgkill(t.proc.pid, t.tid, sig & 0xFFFFFFFF)
    except OSError as e:
        return Err(e.errno)
    return Ret(0)
