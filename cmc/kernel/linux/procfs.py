"""The one reader of /proc: what the kernel says about a node's processes and
threads that cmc does not hold -- a thread's state and the call it sleeps in, a
process's children, its descriptors and where they point, its memory map, its
environment block, its limits and signal masks.

Every reader returns what it found, or an empty answer when the task is gone
(the kernel no longer lists it): a process of a node may end at any moment, and
the caller decides what a vanished one means. Paths are those of proc(5).
"""
from __future__ import annotations

import os


def _path(pid: int, *rest) -> str:
    return "/".join(("/proc", str(pid)) + tuple(str(r) for r in rest))


def status(tid: int) -> dict[str, str]:
    """The fields of /proc/TID/status (Tgid, PPid, SigPnd, ShdPnd, SigBlk, SigCgt,
    SigIgn...); empty when the kernel no longer lists tid."""
    try:
        with open(_path(tid, "status"), "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def task_children(pid: int, tid: int) -> list[int]:
    """The children thread tid of process pid created that are not reaped yet."""
    try:
        with open(_path(pid, "task", tid, "children"), "rb") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def orphans() -> list[int]:
    """The children of this process (cmc, the subreaper of the node processes it
    starts) not reaped yet: its own, and the orphans it adopted."""
    found: list[int] = []
    for tid in task_ids(os.getpid()):
        found += task_children(os.getpid(), tid)
    return found


def task_state(pid: int, tid: int) -> tuple[str, int | None]:
    """The kernel's view of thread tid: (state letter, the call it is in or None).
    State "X" when the kernel no longer lists it."""
    try:
        with open(_path(pid, "task", tid, "stat"), "rb") as f:
            stat = f.read()
        with open(_path(pid, "task", tid, "syscall"), "rb") as f:
            syscall = f.read().split()
    except OSError:
        return "X", None
    state = stat[stat.rindex(b")") + 2:][:1].decode()
    nr = int(syscall[0]) if syscall and syscall[0] not in (b"running", b"-1") else None
    return state, nr


def syscall_args(pid: int, tid: int) -> list[int]:
    """The six arguments of the call thread tid sleeps in (/proc/PID/task/TID/syscall),
    or [] when it is in none or gone."""
    try:
        with open(_path(pid, "task", tid, "syscall"), "rb") as f:
            words = f.read().split()
        return [int(w, 16) for w in words[1:7]] if len(words) >= 7 else []
    except (OSError, ValueError):
        return []


def exit_signal(pid: int) -> int:
    """The signal process pid's parent gets at its end (field 38 of its stat: SIGCHLD,
    or 0 for a copy of a tree's root), or -1 when it is gone."""
    try:
        with open(_path(pid, "stat")) as f:
            return int(f.read().rsplit(")", 1)[1].split()[35])
    except (OSError, ValueError, IndexError):
        return -1


def task_cpu(pid: int, tid: int) -> tuple[str, float]:
    """(state letter, seconds of CPU it has used) of thread tid; ("X", 0) when gone."""
    try:
        with open(_path(pid, "task", tid, "stat"), "rb") as f:
            stat = f.read()
    except OSError:
        return "X", 0.0
    fields = stat[stat.rindex(b")") + 2:].split()
    return fields[0].decode(), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def task_ids(pid: int) -> list[int]:
    """The tids the kernel lists for process pid, in increasing order."""
    try:
        return sorted(int(t) for t in os.listdir(_path(pid, "task")))
    except OSError:
        return []


def listed(pid: int) -> bool:
    """Whether the kernel still lists pid (a zombie is listed)."""
    return os.path.exists(_path(pid))


def fd_link(pid: int, fd: int) -> str:
    """The magic link of descriptor fd of pid: open it to reach the same file, stat
    it to see the file, read it (`fd_target`) for the path."""
    return _path(pid, "fd", fd)


def fd_target(pid: int, fd: int) -> str:
    """Where descriptor fd of pid points: a path, or e.g. "socket:[123]". Raises
    OSError when it is not open."""
    return os.readlink(fd_link(pid, fd))


def fds(pid: int) -> list[int]:
    """The descriptors open in pid. Raises OSError when pid is gone."""
    return sorted(int(name) for name in os.listdir(_path(pid, "fd")))


def fdinfo(pid: int, fd: int) -> dict[str, str]:
    """The fields of /proc/PID/fdinfo/FD (pos, flags in octal, tfd of an epoll
    instance...); the first of a repeated field. Raises OSError when it is not open."""
    out: dict[str, str] = {}
    with open(_path(pid, "fdinfo", fd)) as f:
        for line in f:
            key, _, value = line.partition(":")
            out.setdefault(key, value.strip())
    return out


def epoll_targets(pid: int, fd: int) -> list[tuple[int, int, int]]:
    """(target fd, events mask, data) of each descriptor the epoll instance on fd of
    pid watches, from its fdinfo. Raises OSError when it is not open."""
    out = []
    with open(_path(pid, "fdinfo", fd)) as f:
        for line in f:
            if line.startswith("tfd:"):
                w = line.split()
                out.append((int(w[1]), int(w[3], 16), int(w[5], 16)))
    return out


def directory(pid: int, fd: int | None = None) -> bytes:
    """The directory a relative path of pid is resolved from: its working directory,
    or the one open on descriptor fd (an *at call). Raises OSError."""
    return os.fsencode(os.readlink(_path(pid, "cwd" if fd is None else f"fd/{fd}")))


def cwd_link(pid: int) -> bytes:
    """The magic link of pid's working directory: a path joined to it is resolved
    as pid would resolve it, even where cmc cannot see the directory's name."""
    return os.fsencode(_path(pid, "cwd"))


def ranges(pid: int) -> list[tuple[int, int]]:
    """The address ranges of pid's mappings, in order ([] when pid is gone)."""
    try:
        with open(_path(pid, "maps")) as f:
            return [tuple(int(x, 16) for x in line.split(None, 1)[0].split("-"))
                    for line in f]
    except OSError:
        return []


def mapping_at(pid: int, addr: int) -> tuple[int, int, int, str] | None:
    """(start, end, file offset, path) of pid's mapping that holds address addr, or
    None (no mapping there, no file behind it, or pid gone)."""
    try:
        with open(_path(pid, "maps")) as f:
            for line in f:
                parts = line.split(None, 5)
                start, end = (int(x, 16) for x in parts[0].split("-"))
                if start <= addr < end:
                    path = parts[5].strip() if len(parts) > 5 else ""
                    return (start, end, int(parts[2], 16), path) if path.startswith("/") \
                        else None
    except OSError:
        pass
    return None


def file_mappings(pid: int, private_under: str = "/") -> list[tuple[int, int, str, int, str, int]]:
    """(start, end, permissions as "rw-s", file offset, path, kB of private copies of
    its pages) of each of pid's mappings with a file behind it. The kB are read (from
    smaps, whose every read walks the process's page tables: 0.6 ms for a Go program)
    only where a private mapping of a file under `private_under` exists, else 0.
    Raises OSError when pid is gone."""
    out: list = []
    with open(_path(pid, "maps")) as f:
        for line in f:
            head = line.split(None, 5)
            path = head[5].strip() if len(head) == 6 else ""
            if path.startswith("/"):
                start, end = (int(x, 16) for x in head[0].split("-"))
                out.append([start, end, head[1], int(head[2], 16), path, 0])
    if any(m[2][3] == "p" and m[4].startswith(private_under) for m in out):
        copied, start = {}, None
        with open(_path(pid, "smaps")) as f:
            for line in f:
                head = line.split(None, 2)
                if "-" in head[0] and not head[0].endswith(":"):
                    start = int(head[0].split("-")[0], 16)
                elif head[0] == "Anonymous:" and start is not None:
                    copied[start] = int(head[1])
        for m in out:
            m[5] = copied.get(m[0], 0)
    return [tuple(m) for m in out]


def ns_pid(pid: int) -> int:
    """The number process pid has in its own PID namespace (the last of NSpid), or 0
    when it is gone."""
    try:
        nspid = status(pid).get("NSpid", "")
        return int(nspid.split()[-1]) if nspid else pid
    except (OSError, ValueError):
        return 0


def ns_depth(pid: int) -> int:
    """How many PID namespaces process pid lies under the machine's (NSpid has one
    number per level), or 0 when it is gone."""
    return max(len(status(pid).get("NSpid", "").split()) - 1, 0)


def exit_code(pid: int) -> int | None:
    """The wait status of process pid, ended and not reaped yet (a zombie: field 52 of
    its stat), or None when it is not one."""
    try:
        with open(_path(pid, "stat")) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[49]) if rest[0] in ("Z", "X") else None
    except (OSError, ValueError, IndexError):
        return None


def unix_socket(inode: int) -> tuple[int, int, str] | None:
    """(type, state, name: "" when unnamed, "@..." when abstract) of the AF_UNIX socket
    with this inode, from /proc/net/unix; None when it is not one."""
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                w = line.split(None, 7)
                if int(w[6]) == inode:
                    return int(w[4], 16), int(w[5], 16), w[7].strip() if len(w) > 7 else ""
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    return None


def environment(pid: int) -> tuple[int, bytes] | None:
    """(address of pid's environment block, its contents as the kernel set them up
    at exec), or None."""
    try:
        with open(_path(pid, "stat")) as f:
            start = int(f.read().rsplit(")", 1)[1].split()[47])      # field 50: env_start
        with open(_path(pid, "environ"), "rb") as f:
            return start, f.read()
    except (OSError, ValueError, IndexError):
        return None


def limits(pid: int) -> bytes | None:
    """The text of /proc/PID/limits, or None."""
    try:
        with open(_path(pid, "limits"), "rb") as f:
            return f.read()
    except OSError:
        return None


def signal_mask(tid: int, field: str) -> int:
    """A signal set of /proc/TID/status (SigIgn, SigCgt, SigBlk, SigPnd, ShdPnd) as a
    bit mask (bit n-1: signal n); 0 when the task is gone."""
    try:
        return int(status(tid).get(field, "0"), 16)
    except ValueError:
        return 0
