"""The only module that touches cffi's ffi/lib: thin Python over the C helper (csrc/*.c).

Every function raises OSError(errno) on failure, so callers deal in exceptions,
not in -errno integers.
"""
from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass

from .._cmc_helper import ffi, lib
from .syscalls import ALONE_CLOCK, ALONE_CONTINUE, ROWS


def _check(r: int) -> int:
    if r < 0:
        raise OSError(-r, os.strerror(-r))
    return r


@dataclass(frozen=True)
class Notification:
    id: int
    pid: int
    nr: int
    args: tuple[int, ...]
    ip: int = 0             # where the call was made (the trap page's own calls: tsc.py)


def spawn(path: str, argv: list[str], env: dict[str, str], cwd: str, fds: list[int],
          filter_insns: list[tuple[int, int, int, int]], nofile: int,
          own_pids: bool = False) -> tuple[int, int, list]:
    """Start a node under the filter (with own_pids, as process 1 of a PID namespace
    of its own). Returns (pid, listener, keepalive): the child
    shares cmc's memory until its execve has run, and the kernel reads the path,
    argv and envp only then, so the caller must hold `keepalive` until the node's
    first notified execve has been answered."""
    keep = []

    def cstrs(items: list[str]):
        arr = ffi.new("char *[]", len(items) + 1)
        for i, s in enumerate(items):
            b = ffi.new("char[]", os.fsencode(s))
            keep.append(b)
            arr[i] = b
        arr[len(items)] = ffi.NULL
        return arr

    c_argv = cstrs(argv)
    c_env = cstrs([f"{k}={v}" for k, v in env.items()])
    c_fds = ffi.new("int[5]", fds)
    prog = ffi.new("struct cmc_bpf_insn[]", len(filter_insns))
    for i, (code, jt, jf, k) in enumerate(filter_insns):
        prog[i].code, prog[i].jt, prog[i].jf, prog[i].k = code, jt, jf, k
    out = ffi.new("int *")
    c_path = ffi.new("char[]", os.fsencode(path))
    c_cwd = ffi.new("char[]", os.fsencode(cwd))
    keep += [c_argv, c_env, c_fds, prog, c_path, c_cwd]
    pid = _check(lib.cmc_spawn(c_path, c_argv, c_env, c_cwd, c_fds, prog, len(filter_insns),
                               nofile, 1 if own_pids else 0, out))
    return pid, out[0], keep


_notif = ffi.new("struct cmc_notif *")
_passing = {"nrs": ffi.new("int32_t[]", 0), "args": ffi.new("int32_t[]", 0),
            "flags": ffi.new("int32_t[]", 0), "mask": 0, "n": 0,
            "needle": ffi.new("char[]", b"")}


def private_ipc() -> int:
    """Whether node launches get an IPC namespace of their own: 1 yes, 0 no (cmc may
    not make one here), -1 not known yet (nothing launched)."""
    return lib.cmc_private_ipc()


def pass_through(calls: dict[int, tuple[int, int]], flag_mask: int,
                 needles: tuple[bytes, ...]) -> None:
    """From now on, `recv` answers a notification of syscall nr (a key of `calls`,
    whose value is (path argument, flags argument)) itself, with CONTINUE, when its
    flags have none of the bits of flag_mask and its path contains none of
    `needles`: the call runs natively without a round trip into Python. A flags
    argument -k means: the 64 bits argument k-1 points to."""
    _passing.update(nrs=ffi.new("int32_t[]", list(calls)),
                    args=ffi.new("int32_t[]", [a for a, _ in calls.values()]),
                    flags=ffi.new("int32_t[]", [f for _, f in calls.values()]),
                    mask=flag_mask, n=len(calls),
                    needle=ffi.new("char[]", b"".join(n + b"\0" for n in needles)))


# what `recv` needs to answer some calls of one thread itself (csrc/cmc_helper.h,
# cmc_recv_passing): its clock reads, and rt_sigprocmask and sigaltstack, which
# calls/threads.py answers with CONTINUE (the rows' `alone`, syscalls.py)
[_CLOCK_READ] = [row.nr for row in ROWS if row.alone == ALONE_CLOCK]
_CONTINUED = [row.nr for row in ROWS if row.alone == ALONE_CONTINUE]
_alone = ffi.new("int64_t[7]", [0, _CLOCK_READ, 0, 0, 0, *_CONTINUED])


def alone(tid: int, realtime_ns: int, monotonic_ns: int, cpu_ns: int):
    """`_alone` filled in for thread tid and these clocks, for the next recv."""
    c = _alone
    c[0], c[2], c[3], c[4] = tid, realtime_ns, monotonic_ns, cpu_ns
    return c


def recv(listener: int, alone_=ffi.NULL) -> Notification | None:
    """The next notification; None when it was one that `pass_through` answered, or,
    with `alone_` (from `alone`), a call of its thread answered."""
    p = _passing
    if _check(lib.cmc_recv_passing(listener, _notif, p["nrs"], p["args"], p["flags"],
                                   p["mask"], p["n"], p["needle"], alone_)):
        return None
    n = _notif
    return Notification(n.id, n.pid, n.nr, tuple(n.args[i] for i in range(6)), n.ip)


def respond(listener: int, nid: int, val: int = 0, err: int = 0, cont: bool = False) -> bool:
    """Answer a notification. False when the target is gone (ENOENT)."""
    r = lib.cmc_respond(listener, nid, val, err, 1 if cont else 0)
    if r == -errno.ENOENT:
        return False
    _check(r)
    return True


def addfd(listener: int, nid: int, srcfd: int, newfd: int = -1, cloexec: bool = False) -> int:
    """Place a copy of srcfd in the target and answer notification nid with its number."""
    return _check(lib.cmc_addfd(listener, nid, srcfd, newfd, 1 if cloexec else 0, 1))


def read_mem(pid: int, addr: int, length: int) -> bytes:
    if length == 0:
        return b""
    buf = ffi.new("char[]", length)
    n = _check(lib.cmc_read_mem(pid, addr, buf, length))
    return ffi.buffer(buf, n)[:]


def write_mem(pid: int, addr: int, data: bytes) -> None:
    """Write into the target's memory where it may write itself (an answer, copied
    out as the kernel would: a read-only or unmapped page is EFAULT)."""
    if not data:
        return
    n = _check(lib.cmc_answer_mem(pid, addr, data, len(data)))
    if n != len(data):
        raise OSError(errno.EFAULT, "short write to target memory")


def exec_continue(listener: int, nid: int, pid: int, random16: bytes,
                  timeout_ms: int, trap: bool = True) -> tuple[int, int]:
    """Let a notified execve run, hiding the vDSO in the new image and (trap) making
    its TSC cmc's. Returns (outcome, status): 0 exec done, 1 exec failed, 2 target
    exited (status: its wait status), 3 exec done but the trap not set (status: errno)."""
    status = ffi.new("int *")
    r = _check(lib.cmc_exec_continue(listener, nid, pid, random16, 1 if trap else 0,
                                     timeout_ms, status))
    return r, status[0]


def trap_page() -> tuple[int, int]:
    """(address, code length) of the page with cmc's SIGSEGV handler (the TSC trap)."""
    addr = ffi.new("uint64_t *")
    n = lib.cmc_trap_page(addr)
    return addr[0], n


def watch_start(cwd: str | None) -> None:
    """While a start runs (cwd: its node's directory; None: no more), opens of paths that
    may lead into it come to Python (see cmc_watch_start)."""
    lib.cmc_watch_start(ffi.NULL if cwd is None else os.fsencode(cwd))


def getfd(pid: int, fd: int, pidfd: int = -1) -> int:
    """A copy of the node's descriptor fd, in cmc (close it after use); through pidfd,
    when cmc holds one of pid."""
    return _check(lib.cmc_getfd(pid, fd, pidfd))


def epoll_ready(epfd: int, max_events: int) -> list[tuple[int, int]]:
    """(events, data) of the ready entries of an epoll instance, without waiting."""
    n = min(max(max_events, 1), 64)
    events = ffi.new("uint32_t[]", n)
    data = ffi.new("uint64_t[]", n)
    got = _check(lib.cmc_epoll_ready(epfd, events, data, n))
    return [(events[i], data[i]) for i in range(got)]


STATE_SIZE = lib.cmc_thread_state_size()


def fork_node(listener: int, threads: list[tuple[int, int, int]], cwd: str,
              maps: list[tuple[int, int, int, int, int, str]] = (),
              unshare: int = 0, known: list[bytes | None] | None = None
              ) -> tuple[list[int], list[bytes]]:
    """Fork a node process, each of whose threads (tid, held notification id,
    clear_child_tid address) is held (see cmc_fork_threads); the copy works in cwd,
    its mappings `maps` (start, length, offset, prot, flags, the copy's file) mapped
    again. `known`: per thread, its state as an earlier fork returned it, if it has
    not run since (None: not known); the first's is read always. Returns the copy's
    thread ids in the order of `threads` (the first: its pid), and every thread's
    state. Every thread of the copy, and every thread of the original whose state was
    not known, then makes its held call again, as a new notification on the same
    listener. `unshare`: flags of the namespaces the copy gets of its own
    (unshare(2)), before its other threads are made."""
    n = len(threads)
    known = known or [None] * n
    states = ffi.new("char[]", n * STATE_SIZE)
    given = ffi.new("char[]", n)
    for i, state in enumerate(known):
        if i and state is not None:
            ffi.memmove(states + i * STATE_SIZE, state, STATE_SIZE)
            given[i] = b"\x01"
    tids = ffi.new("int[]", [t for t, _, _ in threads])
    held = ffi.new("uint64_t[]", [h for _, h, _ in threads])
    ctids = ffi.new("uint64_t[]", [c for _, _, c in threads])
    out = ffi.new("int[]", n)
    remaps = ffi.new("struct cmc_remap[]", max(len(maps), 1))
    paths = [ffi.new("char[]", os.fsencode(m[5])) for m in maps]   # alive through the call
    for r, m, path in zip(remaps, maps, paths):
        r.start, r.len, r.offset, r.prot, r.flags = m[:5]
        r.path = path
    _check(lib.cmc_fork_threads(listener, n, tids, held, ctids, os.fsencode(cwd),
                                len(maps), remaps, unshare, states, given, out))
    raw = ffi.buffer(states)[:]
    return list(out), [raw[i * STATE_SIZE:(i + 1) * STATE_SIZE] for i in range(n)]


def _spare_pid(taken: set[int]) -> int:
    """A pid near the top of the machine's range that no process of a tree has (its
    copies' helpers take it, one at a time)."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            top = int(f.read()) - 1
    except (OSError, ValueError):
        top = 32767
    return next(p for p in range(top, 1, -1) if p not in taken)


def fork_tree(listener: int, procs: list[tuple[int, int, list[tuple[int, int, int]]]],
              cwd: str, maps: list[list[tuple[int, int, int, int, int, str]]],
              keep_sigchld: bool, reopen: list[tuple[int, int, str, int, int, bool]] = ()
              ) -> tuple[list[list[int]], list[int]]:
    """Copy a node that is a root and its children (see cmc_fork_tree): `procs`, the
    root first, each (pid as its parent knows it, zombie wait status or -1, threads:
    [(tid, held notification id or 0 for a native sleeper, clear_child_tid)]), a
    zombie with no threads; `maps`, each process's mappings as fork_node's; `reopen`,
    files each copy opens again itself (process index, fd, path, flags, offset,
    close-on-exec). Returns
    each process's copied thread ids (a zombie's: [its copy's pid]) and, in the same
    order, the copies' pids."""
    n = sum(len(threads) for _, _, threads in procs)
    flat = [t for _, _, threads in procs for t in threads]
    tids = ffi.new("int[]", [t for t, _, _ in flat] or [0])
    held = ffi.new("uint64_t[]", [h for _, h, _ in flat] or [0])
    ctids = ffi.new("uint64_t[]", [c for _, _, c in flat] or [0])
    cprocs = ffi.new("struct cmc_tree_proc[]", len(procs))
    allmaps = [m for ms in maps for m in ms]
    remaps = ffi.new("struct cmc_remap[]", max(len(allmaps), 1))
    paths = [ffi.new("char[]", os.fsencode(m[5])) for m in allmaps]   # alive through the call
    for r, m, path in zip(remaps, allmaps, paths):
        r.start, r.len, r.offset, r.prot, r.flags = m[:5]
        r.path = path
    first = map_first = 0
    for c, (pid, status, threads), ms in zip(cprocs, procs, maps):
        c.first, c.nthreads, c.pid, c.status = first, len(threads), pid, max(status, 0)
        c.map_first, c.nmaps = map_first, len(ms)
        first += len(threads)
        map_first += len(ms)
    out = ffi.new("int[]", n + len(procs))
    creopen = ffi.new("struct cmc_reopen[]", max(len(reopen), 1))
    rpaths = [ffi.new("char[]", os.fsencode(r[2])) for r in reopen]
    for c, r, path in zip(creopen, reopen, rpaths):
        c.proc, c.fd, c.flags, c.pos, c.cloexec = r[0], r[1], r[3], r[4], int(r[5])
        c.path = path
    _check(lib.cmc_fork_tree(listener, len(procs), cprocs, n, tids, held, ctids,
                             os.fsencode(cwd), int(keep_sigchld), remaps, len(reopen),
                             creopen, _spare_pid({pid for pid, _, _ in procs}), out))
    copies, pids, at = [], [], 0
    for i, (_, _, threads) in enumerate(procs):
        if threads:
            copies.append(list(out[at:at + len(threads)]))
            at += len(threads)
        else:
            copies.append([out[n + i]])
        pids.append(copies[-1][0])
    return copies, pids


def kcmp(pid1: int, pid2: int, kind: int, idx1: int, idx2: int) -> int:
    """kcmp(2): 0 when the two are one kernel object, else 1, 2 or 3; -1 when it
    cannot tell (a process gone)."""
    return lib.cmc_kcmp(pid1, pid2, kind, idx1, idx2)


def tee(src: int, dst: int, length: int) -> None:
    """Copy the `length` bytes buffered in pipe src into pipe dst, leaving src's."""
    _check(lib.cmc_tee(src, dst, length))


def epoll_fill(epfd: int, entries: list[tuple[int, int, int, int]]) -> None:
    """Register in epoll instance epfd each (cmc's descriptor of a file, the number
    to key it by, events mask, 64-bit data): see cmc_epoll_fill."""
    n = len(entries)
    _check(lib.cmc_epoll_fill(epfd, n, ffi.new("int[]", [e[0] for e in entries]),
                              ffi.new("int[]", [e[1] for e in entries]),
                              ffi.new("uint32_t[]", [e[2] & 0xFFFFFFFF for e in entries]),
                              ffi.new("uint64_t[]", [e[3] for e in entries])))


def tgkill(tgid: int, tid: int, sig: int) -> None:
    """Send signal sig to thread tid of process tgid (OSError on failure)."""
    _check(lib.cmc_tgkill(tgid, tid, sig))


def place_fd(listener: int, nid: int, srcfd: int, newfd: int, cloexec: bool) -> None:
    """Install a copy of srcfd in the target at number newfd, without answering nid."""
    _check(lib.cmc_addfd(listener, nid, srcfd, newfd, 1 if cloexec else 0, 0))


def move_away(tids: list[int]) -> None:
    """Threads about to be killed, moved off the CPU cmc is pinned to (see cmc_move_away)."""
    lib.cmc_move_away(ffi.new("int[]", tids or [0]), len(tids))


def bury(pid: int) -> None:
    """Child pid, killed, reaped by a thread of the helper's own (OSError: not taken)."""
    _check(lib.cmc_bury(pid))


def buried(timeout_s: float) -> int:
    """Wait until every pid given to `bury` is reaped (at most timeout_s): how many are not."""
    return lib.cmc_buried(int(timeout_s * 1000))


def subreaper() -> None:
    """Orphans of the node processes this process starts become its children."""
    _check(lib.cmc_subreaper())


def file_id(path: str) -> tuple[int, int, int, int]:
    """(device, inode, birth seconds, birth nanoseconds) of the file at path (a
    last symlink not followed): the same across renames, different for a new file
    that reuses an inode number."""
    out = ffi.new("uint64_t[4]")
    _check(lib.cmc_file_id(os.fsencode(path), out))
    return (out[0], out[1], out[2], out[3])


# -- the guard: what kills a node's process tree when cmc is gone ----------------------
# A node's first process dies with cmc (PR_SET_PDEATHSIG), but the processes it forks
# do not (the kernel clears the death signal in a child). The guard, a process of its
# own started once per cmc process, is told each node's process group; when cmc is
# gone, however (its pipe closes), it kills every group it still watches.
_GUARD = {"pid": 0, "fd": -1, "owner": 0}


def _guard_fd() -> int:
    if _GUARD["owner"] != os.getpid():        # none yet, or inherited by a fork
        out = ffi.new("int *")
        _GUARD["pid"] = _check(lib.cmc_guard(out))
        _GUARD["fd"], _GUARD["owner"] = out[0], os.getpid()
        _check(lib.cmc_subreaper())
    return _GUARD["fd"]


def guard_watch(pgid: int) -> None:
    os.write(_guard_fd(), struct.pack("<i", pgid))


def guard_forget(pgid: int) -> None:
    if _GUARD["owner"] == os.getpid():
        os.write(_GUARD["fd"], struct.pack("<i", -pgid))
