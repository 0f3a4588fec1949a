"""The calls threads and processes are made of: creating one (clone, clone3, fork),
ending one (exit), giving way (sched_yield), the futex, emulated, and exec.

Every futex call is notified and answered by cmc, with wait queues of its own
(threads.Futexes): a thread that waits is held, and another thread's FUTEX_WAKE
makes its call complete. The kernel never sees a waiter, so no thread wakes
behind cmc's back, and the order in which threads run stays cmc's (one at a time,
proc/scheduler.py). A wait with a timeout is a FIRE, like a sleep; its deadline is on the
node's logical clock. cmc also does what the kernel does when a thread created
with CLONE_CHILD_CLEARTID exits (proc/scheduler.py): the kernel clears the word, cmc wakes
its waiters (pthread_join).
"""
from __future__ import annotations

import errno
import hashlib
import os
import struct

from ...errors import TargetError
from ..linux import _native, procfs
from ..linux.abi import CLONE_THREAD, TRAP_PAGE
from ..linux.syscalls import NR, ROW
from .answer import ANSWERED, CONTINUE, Block, Err, Ret
from .handler import fd_arg, read_timespec, signed, unsupported
from . import tsc
from .sockets import close_vfd

CLONE_CHILD_CLEARTID = 0x00200000
CLONE_VFORK = 0x00004000
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NEWS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000 | 0x00000080

FUTEX_WAIT, FUTEX_WAKE, FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP = 0, 1, 3, 4, 5
FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET = 9, 10
FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME = 128, 256
FUTEX_CMD_MASK = ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)
BITSET_ANY = 0xFFFFFFFF


# -- creating threads and processes -------------------------------------------------
def _create(call, flags: int, ctid: int):
    """clone/clone3: a thread (CLONE_THREAD) or a process of the node (docs/target-contract.md,
    "Process trees").
    Either way the call runs natively; the node finds the new task (proc/scheduler.py)."""
    proc = call.proc
    if flags & CLONE_NEWS:
        return unsupported(call, call.nr, call.args, "creates new namespaces (refused: "
                           "a node stays in cmc's)", first_is_fd=False)
    if not flags & CLONE_THREAD:
        return _fork(call, bool(flags & CLONE_VFORK))
    proc.node.tasks.clone_ctid = ctid if flags & CLONE_CHILD_CLEARTID else 0
    proc.node.tasks.clone_parent = call.pid
    proc.node.tasks.clones += 1
    return CONTINUE


def _fork(call, vfork: bool):
    """A new process of the node: it inherits the filter (its calls come to cmc on
    the node's listener), and copies of the caller's descriptors; a vfork's parent
    waits natively until its child execs or exits."""
    proc = call.proc                  # the Process that forks
    proc.node.tasks.forking = (proc, call.pid)
    proc.vforked = vfork
    return CONTINUE


def clone_flags(proc, nr: int, args) -> tuple[int, int] | None:
    """(flags, CLONE_CHILD_CLEARTID address) of a clone or clone3 call of proc; None
    when clone3's arguments cannot be read."""
    if nr != NR["clone3"]:
        return args[0], args[3]
    raw = proc.read(args[0], 24)                  # flags, pidfd, child_tid
    if raw is None or len(raw) != 24:
        return None
    flags, _, ctid = struct.unpack("<QQQ", raw)
    return flags, ctid


def sys_clone(call):
    got = clone_flags(call.proc, call.nr, call.args)
    return Err(errno.EFAULT) if got is None else _create(call, *got)


def sys_fork(call):
    return _fork(call, call.nr == NR["vfork"])


def sys_setsid(call):
    """A session of its own (a daemon, a server's workers): the new group, numbered
    by the caller's pid, is the node's (Tasks.new_group). A group leader cannot, as
    on Linux."""
    proc = call.proc
    try:
        if os.getpgid(proc.pid) == proc.pid:
            return Err(errno.EPERM)
    except ProcessLookupError:
        return Err(errno.ESRCH)
    proc.node.tasks.new_group(proc.pid)
    return CONTINUE


def sys_setpgid(call):
    """Moving a process of the node into another group: a new group is the node's
    (Tasks.new_group); the kernel checks the rest (a group in the same session, a
    child that has not exec'd)."""
    proc, args = call.proc, call.args
    tasks = proc.node.tasks
    target = tasks.host_pid(signed(args[0])) or proc.pid
    group = tasks.host_pid(signed(args[1])) or target
    if group > 0 and group == target:
        tasks.new_group(group)
    return CONTINUE


def sys_refused(call):
    """ptrace, unshare, setns: refused, naming what the call would do (its row's `why`)."""
    return unsupported(call, call.nr, call.args, f"{ROW[call.nr].why} (refused: cmc traces "
                       "and isolates its nodes itself)", first_is_fd=False)


def sys_exit(call):
    """A thread ends (the process ends with exit_group): it runs natively, and the
    node forgets the thread once the kernel does."""
    thread = call.node.tasks.thread_of(call.pid)
    if thread is not None:
        thread.exiting = True
    return CONTINUE


def sys_signal_setup(call):
    """Run natively. They are notified so that a new thread and the one that made it
    (both call them first) are held there, and so run one at a time from there on."""
    return CONTINUE


def sys_sched_yield(call):
    """Let every other thread that can run, run first (proc/scheduler.py); then return."""
    call.node.tasks.give_way(call.pid)
    return Block(lambda: Ret(0), what="sched_yield")


# -- the futex ---------------------------------------------------------------------
def sys_futex(call):
    proc, args = call.proc, call.args
    uaddr, op, val = args[0], signed(args[1]), args[2] & 0xFFFFFFFF
    cmd = op & FUTEX_CMD_MASK
    # A private futex is the process's (its memory); a shared one may be waited on by
    # several processes of the node (memory they share since a fork, at one address).
    futexes = proc.futexes if op & FUTEX_PRIVATE_FLAG else proc.node.tasks.shared_futexes
    if cmd in (FUTEX_WAIT, FUTEX_WAIT_BITSET):
        bitset = BITSET_ANY if cmd == FUTEX_WAIT else args[5] & 0xFFFFFFFF
        if bitset == 0:
            return Err(errno.EINVAL)
        timeout = None
        if args[3]:
            ns = read_timespec(proc, args[3])
            if ns is None:
                return Err(errno.EINVAL)
            if cmd == FUTEX_WAIT_BITSET:     # an absolute deadline on the chosen clock
                now = proc.node.realtime_ns() if op & FUTEX_CLOCK_REALTIME else proc.node.monotonic_ns()
                ns -= now
            timeout = max(ns, 0)
        word = _word(proc, uaddr)
        if word is None:
            return Err(errno.EFAULT)
        if word != val:
            return Err(errno.EAGAIN)
        if timeout == 0:
            # A deadline already reached: the call takes a nanosecond of the node's
            # time, as a real one takes some, so that a loop that waits again until
            # the clock is past the deadline (Rust's wait_timeout_while) ends.
            proc.node.pass_time(1)
            return Err(errno.ETIMEDOUT)
        waiter = futexes.wait(uaddr, bitset, proc.node.tasks.thread_of(call.pid).tag)

        def woken():
            return Ret(0) if waiter.woken else None

        def timed_out():
            futexes.leave(waiter)
            return Err(errno.ETIMEDOUT)
        return Block(woken, timeout, timed_out if timeout is not None else None, "futex",
                     cancel=lambda: futexes.leave(waiter), waiter=waiter, queue=futexes)
    if cmd in (FUTEX_WAKE, FUTEX_WAKE_BITSET):
        bitset = BITSET_ANY if cmd == FUTEX_WAKE else args[5] & 0xFFFFFFFF
        if bitset == 0:
            return Err(errno.EINVAL)
        return Ret(futexes.wake(uaddr, _count(val), bitset))
    if cmd in (FUTEX_REQUEUE, FUTEX_CMP_REQUEUE):
        if cmd == FUTEX_CMP_REQUEUE:
            word = _word(proc, uaddr)
            if word is None:
                return Err(errno.EFAULT)
            if word != args[5] & 0xFFFFFFFF:
                return Err(errno.EAGAIN)
        woken = futexes.wake(uaddr, _count(val))
        moved = futexes.requeue(uaddr, args[4], _count(args[3] & 0xFFFFFFFF))
        return Ret(woken + moved if cmd == FUTEX_CMP_REQUEUE else woken)
    if cmd == FUTEX_WAKE_OP:
        return _wake_op(proc, futexes, uaddr, args[4], _count(val),
                        _count(args[3] & 0xFFFFFFFF), args[5] & 0xFFFFFFFF)
    return unsupported(call, call.nr, args, "uses a futex operation cmc does not emulate "
                       "(priority-inheritance and fd futexes are not supported)",
                       first_is_fd=False)


def _count(v: int) -> int:
    """A count argument: the kernel reads an int; a negative one means all."""
    v = signed(v)
    return v if v >= 0 else 1 << 31


def _word(proc, addr: int) -> int | None:
    raw = proc.read(addr, 4)
    return struct.unpack("<I", raw)[0] if raw is not None and len(raw) == 4 else None


def _sext12(v: int) -> int:
    return v - 0x1000 if v & 0x800 else v


def _wake_op(proc, futexes, uaddr: int, uaddr2: int, n: int, n2: int, encoded: int):
    """FUTEX_WAKE_OP: change the word at uaddr2, wake n on uaddr, and n2 on uaddr2 if
    the old word met the condition (as kernel/futex/waitwake.c)."""
    op, cmp = (encoded >> 28) & 0xF, (encoded >> 24) & 0xF
    oparg, cmparg = _sext12((encoded >> 12) & 0xFFF), _sext12(encoded & 0xFFF)
    if op & 8:                       # FUTEX_OP_OPARG_SHIFT
        oparg, op = 1 << (oparg & 31), op & 7
    old = _word(proc, uaddr2)
    if old is None:
        return Err(errno.EFAULT)
    new = {0: oparg, 1: old + oparg, 2: old | oparg, 3: old & ~oparg, 4: old ^ oparg}.get(op)
    if new is None:
        return Err(errno.ENOSYS)
    if not proc.write(uaddr2, struct.pack("<I", new & 0xFFFFFFFF)):
        return Err(errno.EFAULT)
    s_old = old - (1 << 32) if old & 0x80000000 else old
    met = {0: s_old == cmparg, 1: s_old != cmparg, 2: s_old < cmparg, 3: s_old <= cmparg,
           4: s_old > cmparg, 5: s_old >= cmparg}.get(cmp)
    if met is None:
        return Err(errno.ENOSYS)
    woken = futexes.wake(uaddr, n)
    if met:
        woken += futexes.wake(uaddr2, n2)
    return Ret(woken)


# -- exec ---------------------------------------------------------------------------
def sys_execve(call):
    proc, args = call.proc, call.args
    notif = call.notif
    if notif.nr == NR["execveat"]:
        path = proc.read_cstr(args[1])
        dirfd = fd_arg(args[0])
        if path is not None and not path.startswith(b"/") and dirfd != -100:
            return CONTINUE          # relative to a directory fd: rare, let it run
    else:
        path = proc.read_cstr(args[0])
    if path is None:
        return Err(errno.EFAULT)
    full = path if path.startswith(b"/") else os.path.join(procfs.cwd_link(notif.pid), path)
    if not os.path.exists(full):
        return Err(errno.ENOENT)
    if not os.access(full, os.X_OK) or os.path.isdir(full):
        return Err(errno.EACCES)
    try:
        outcome, status = _native.exec_continue(call.listener, notif.id, notif.pid,
                                                _exec_seed(proc.node), 5000)
    except OSError as e:
        raise TargetError(proc.node.where() +
                          f"execve({path.decode(errors='replace')}) could not be traced: "
                          f"{e.strerror}") from None
    proc.node.exec_count += 1
    if outcome == 2:      # the program died during exec; C has reaped it
        proc.pid = 0
        raise TargetError(proc.node.where() +
                          f"died during execve({path.decode(errors='replace')}) "
                          f"(wait status {status:#x})")
    if outcome == 3:      # the image runs, but its TSC could not be made cmc's
        raise TargetError(proc.node.where() +
                          f"execve({path.decode(errors='replace')}): the TSC trap could not "
                          f"be set ({os.strerror(status)}; its page is at {TRAP_PAGE:#x})")
    if outcome == 0:      # close-on-exec virtual fds go away with the old image
        for fd in sorted(proc.cloexec):
            close_vfd(proc, fd)
        tsc.after_exec(proc)
        proc.wipes = False            # the image's mappings went with it
    return ANSWERED


def _exec_seed(node) -> bytes:
    return hashlib.blake2b(f"cmc-auxv/{node.index}/{node.incarnation}/{node.exec_count}".encode(),
                           digest_size=16).digest()
