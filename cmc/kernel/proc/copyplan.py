"""What a copy of a node's process needs of its own (fork.py forks it): its
descriptors and mappings, planned once per lease from /proc (`fd_plan`), and made for
the copy after the fork (`replace_fds`, and the mappings `cmc_fork_threads` maps
again): files of the node's directory opened again, pipes, eventfds and epoll instances
made anew, HOME pointed at the copy's directory (docs/design.md, "Copying a world
instead of replaying it"). What cannot be made anew faithfully makes the world one
that is replayed (NotForkable)."""
from __future__ import annotations

import fcntl
import mmap
import os
import re
import select
import socket
import stat
import struct
import termios

from ...errors import NotForkable
from ..linux import _native, procfs

_KEEP_FLAGS = (os.O_ACCMODE | os.O_APPEND | os.O_NONBLOCK | os.O_DIRECTORY | os.O_NOFOLLOW
               | os.O_DSYNC | os.O_SYNC | os.O_NOATIME | os.O_DIRECT | os.O_PATH)




def fd_plan(node) -> list[tuple]:
    """What to do in a copy of node's process, per descriptor: ("file", fd, path,
    flags, pos, cloexec), ("pipe", [(fd, read end?, flags, cloexec), ...]) for a pipe
    both of whose ends are the process's, ("eventfd", fd, semaphore?, flags,
    cloexec), ("epoll", fd, cloexec, [(target fd, events, data), ...]), for a node
    `forkable` let be lent. Raises NotForkable."""
    plan, pipes = _process_plan(node, node.tasks.pid)
    for ends in pipes.values():
        if not any(read for _, read, _, _ in ends) or all(read for _, read, _, _ in ends):
            raise NotForkable(f"node {node.name} has a pipe whose other end is not its own")
        plan.insert(_before_epolls(plan), ("pipe", ends))
    return plan


def _before_epolls(plan: list[tuple]) -> int:
    return next((i for i, item in enumerate(plan) if item[0] == "epoll"), len(plan))


def tree_plan(node, pids: list[int]) -> list[list[tuple]]:
    """fd_plan for each live process of a node that is a process tree (`pids`, in
    the order given): a pipe may have its ends in several of them, ("pipe", ends,
    its name, (pid, fd) of a read end), made once for all; a file of the node's
    directory open in several through one open file description (a descriptor the
    child inherited), ("file", ..., key) with the same key in each, opened once for
    all. Any other kernel object shared by two of them: NotForkable."""
    plans, pipes = [], {}
    for pid in pids:
        plan, mine = _process_plan(node, pid)
        plans.append(plan)
        for target, ends in mine.items():
            pipes.setdefault(target, []).append((pid, ends))
    for target, where in pipes.items():
        ends = [e for _, its in where for e in its]
        if not any(read for _, read, _, _ in ends) or all(read for _, read, _, _ in ends):
            raise NotForkable(f"node {node.name} has a pipe whose other end is not its own")
        source = next((pid, fd) for pid, its in where for fd, read, _, _ in its if read)
        for pid, its in where:
            plan = plans[pids.index(pid)]
            plan.insert(_before_epolls(plan), ("pipe", its, target, source))
    # one open file description reached from two processes (kcmp): one key
    seen: list[tuple[int, int, tuple]] = []
    keys: dict[tuple[int, int], tuple] = {}     # (plan, item) -> key
    for n, (pid, plan) in enumerate(zip(pids, plans)):
        for i, item in enumerate(plan):
            if item[0] not in ("file", "eventfd", "unixdgram", "unixhalf", "memfd", "epoll"):
                continue
            fd = item[1]
            twin = next((k for p, f, k in seen if p != pid and _same_file(p, f, pid, fd)), None)
            if twin is not None and item[0] != "file":
                raise NotForkable(f"node {node.name} has {item[0]} shared by two of its "
                                  "processes")
            key = twin if twin is not None else (pid, fd)
            seen.append((pid, fd, key))
            keys[n, i] = key
    shared = [k for k in keys.values()]
    for (n, i), key in keys.items():
        if shared.count(key) > 1:
            plans[n][i] = plans[n][i] + (key,)
    return plans


_KCMP_FILE = 0


def _same_file(pid1: int, fd1: int, pid2: int, fd2: int) -> bool:
    """Whether fd1 of pid1 and fd2 of pid2 are one open file description (kcmp)."""
    return _native.kcmp(pid1, pid2, _KCMP_FILE, fd1, fd2) == 0


def _process_plan(node, pid: int) -> tuple[list[tuple], dict[str, list]]:
    """fd_plan of process pid, but its pipes apart (name -> its ends)."""
    cwd = node.cwd
    try:
        plan, pipes, epolls = [], {}, []
        for start, end, perms, offset, path, copied in procfs.file_mappings(pid, cwd + "/"):
            if path.startswith((cwd + ".shm/", "/SYSV")):
                raise NotForkable(f"node {node.name} maps a shared-memory object")
            if not path.startswith(cwd + "/"):
                continue                 # the program and its libraries: the same files
            rel = path[len(cwd) + 1:]
            if perms[3] == "p" and copied:
                raise NotForkable(f"node {node.name} wrote to its private mapping of {rel}")
            prot = (perms[0] == "r") | (perms[1] == "w") << 1 | (perms[2] == "x") << 2
            plan.append(("map", start, end - start, offset, prot,
                         mmap.MAP_SHARED if perms[3] == "s" else mmap.MAP_PRIVATE, rel))
        fds = procfs.fds(pid)
        for fd in fds:
            target = procfs.fd_target(pid, fd)
            if target.startswith("/memfd:") and target[7:].split(" ")[0] in CMC_MEMFDS:
                # a file cmc answered an open with (its random stream, a machine file):
                # the copy gets one with the same bytes, read from where the original is
                info = procfs.fdinfo(pid, fd)
                flags = int(info["flags"], 8)
                plan.append(("memfd", fd, target[7:].split(" ")[0], int(info["pos"]),
                             bool(flags & os.O_CLOEXEC)))
            elif target.startswith("/"):
                info = procfs.fdinfo(pid, fd)
                flags = int(info["flags"], 8)
                if target.startswith(cwd + ".shm/"):
                    raise NotForkable(f"node {node.name} has a shared-memory object open")
                inside = target == cwd or target.startswith(cwd + "/")
                if not inside and flags & os.O_ACCMODE == os.O_WRONLY and flags & os.O_APPEND:
                    continue                # stdout, stderr, logs: the copy appends too
                if target.endswith(" (deleted)"):
                    raise NotForkable(f"node {node.name} has a deleted file open")
                mode = os.stat(procfs.fd_link(pid, fd)).st_mode
                if stat.S_ISCHR(mode):
                    continue                        # /dev/null and the like: no state
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    raise NotForkable(f"node {node.name} has {_kind(target)} open")
                plan.append(("file", fd, target, flags & _KEEP_FLAGS, int(info["pos"]),
                             bool(flags & os.O_CLOEXEC)))
            elif target.startswith("pipe:"):
                flags = int(procfs.fdinfo(pid, fd)["flags"], 8)
                pipes.setdefault(target, []).append(
                    (fd, flags & os.O_ACCMODE == os.O_RDONLY, flags & os.O_NONBLOCK,
                     bool(flags & os.O_CLOEXEC)))
            elif target == "anon_inode:[eventfd]":
                info = procfs.fdinfo(pid, fd)
                flags = int(info["flags"], 8)
                plan.append(("eventfd", fd, info.get("eventfd-semaphore") == "1",
                             flags & os.O_NONBLOCK, bool(flags & os.O_CLOEXEC)))
            elif target == "anon_inode:[eventpoll]":
                flags = int(procfs.fdinfo(pid, fd)["flags"], 8)
                epolls.append(("epoll", fd, bool(flags & os.O_CLOEXEC),
                               procfs.epoll_targets(pid, fd)))
            elif target.startswith("socket:") and (lone := _lone_unix(pid, fd, target)):
                flags = int(procfs.fdinfo(pid, fd)["flags"], 8)
                if lone == "half":
                    plan.append(("unixhalf", fd, flags & os.O_NONBLOCK,
                                 bool(flags & os.O_CLOEXEC)))
                else:
                    plan.append(("unixdgram", fd, lone == "named", flags & os.O_NONBLOCK,
                                 bool(flags & os.O_CLOEXEC)))
            else:
                raise NotForkable(f"node {node.name} has {_kind(target)} open")
        movable = {fd for ends in pipes.values() for fd, *_ in ends} \
            | {p[1] for p in plan if p[0] in ("eventfd", "unixdgram", "unixhalf", "memfd")}
        for item in epolls:
            for tfd, _, _ in item[3]:
                if tfd not in movable:
                    what = _kind(procfs.fd_target(pid, tfd)) if tfd in fds else \
                        "a descriptor it closed"
                    raise NotForkable(f"node {node.name} watches {what} with an epoll instance")
        plan.extend(epolls)          # last: they watch what the others make
    except (OSError, KeyError, ValueError, IndexError) as e:
        raise NotForkable(f"cannot read the descriptors of node {node.name}: "
                          f"{e.__class__.__name__}") from None
    return plan, pipes


# the names of the memfds cmc answers opens with (calls/opens.py `_answer_with`)
CMC_MEMFDS = ("random", "machine", "limits")


def _kind(target: str) -> str:
    """What a descriptor is, without the numbers that differ from run to run."""
    return target.split(":[")[0] + (":[...]" if ":[" in target else "")


def _lone_unix(pid: int, fd: int, target: str) -> str:
    """Whether the socket on fd of pid is an AF_UNIX socket that no other socket
    reaches, with nothing queued: a datagram socket, unconnected, with no name
    ("unnamed") or an automatic one ("named": a runtime's socket kept for logging to
    the host, say); or one end of a stream socket pair whose other end is closed
    ("half": the JDK keeps one, made at its first socket close, to dup2 over a
    descriptor it closes); "" otherwise. A copy gets a new one like it (an automatic
    name differs; nothing can send to either)."""
    found = procfs.unix_socket(int(target[len("socket:["):-1]))
    if found is None:
        return ""
    kind, state, name = found
    if kind == socket.SOCK_DGRAM and state == 1 and (name == "" or _AUTOBIND.match(name)):
        lone = "named" if name else "unnamed"
    elif kind == socket.SOCK_STREAM and state == 3 and name == "":
        lone = "half"                # if its peer is gone (below)
    else:
        return ""
    mine = _native.getfd(pid, fd)
    try:
        if struct.unpack("i", fcntl.ioctl(mine, termios.FIONREAD, b"\0" * 4))[0]:
            return ""
        if lone == "half":
            p = select.poll()
            p.register(mine, 0)
            if not any(ev & select.POLLHUP for _, ev in p.poll(0)):
                return ""            # the other end is open: a pair the node uses
    finally:
        os.close(mine)
    return lone


_AUTOBIND = re.compile(r"@[0-9a-f]{5}$")


def _readable(fd: int) -> bool:
    """Whether an epoll instance has an event to report (without taking it)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


def home_address(node, pid: int = 0) -> int | None:
    """Where, in the memory of node's process (pid; default: its first), the value of
    HOME=<its directory> lies (the environment block the kernel set up at exec), or
    None."""
    env = procfs.environment(pid or node.tasks.pid)
    if env is None:
        return None
    env_start, block = env
    entry = b"HOME=" + os.fsencode(node.cwd) + b"\0"
    if block.startswith(entry):
        return env_start + 5
    at = block.find(b"\0" + entry)
    return None if at < 0 else env_start + at + 1 + 5


def move_home(node, address: int | list[int] | None, proc=None) -> None:
    """HOME is the node's directory (node.py): point the copy's at its own (as long
    as the original's: fork_world checks); in proc (default: its first process). A
    list: every place the name is written (`directory_names`)."""
    for at in address if isinstance(address, list) else [address]:
        if at is not None:
            (proc or node.tasks.main).write(at, os.fsencode(node.cwd))


def directory_names(node) -> list[int]:
    """Where the name of node's directory is written in the writable memory of its
    process: HOME in the environment block, and every copy a program made of it (Go's
    runtime copies the environment; a path made from HOME). Only pages present are
    read (/proc/PID/pagemap), SEARCH_PAGES at most: a start with more writable address
    space (a sanitizer's shadow: terabytes, reserved) is not kept (NotForkable). A kept
    start's copies are each given their own directory's name there (zygote.py)."""
    pid, name, out = node.tasks.pid, os.fsencode(node.cwd), set()
    page = mmap.PAGESIZE
    with open(f"/proc/{pid}/maps") as f:
        ranges = [(int(lo, 16), int(hi, 16)) for lo, hi, perms in
                  (line.split()[0].split("-") + [line.split()[1]] for line in f)
                  if perms.startswith("rw")]
    pages = sum(hi - lo for lo, hi in ranges) // page
    if pages > SEARCH_PAGES:
        raise NotForkable(f"node {node.name} has {pages * page >> 30} GiB of writable "
                          "address space to search for its directory's name")
    with open(f"/proc/{pid}/pagemap", "rb", buffering=0) as pm, \
            open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for lo, hi in ranges:
            run = None
            for i, e in enumerate(_entries(pm.fileno(), lo // page, (hi - lo) // page)):
                if e >> 62 and run is None:             # present or swapped
                    run = i
                elif not e >> 62 and run is not None:
                    start = lo + run * page
                    data = os.pread(mem.fileno(), (i - run) * page, start)
                    at = data.find(name)
                    while at >= 0:
                        out.add(start + at)
                        at = data.find(name, at + 1)
                    run = None
    return sorted(out)


SEARCH_PAGES = 1 << 22    # 16 GiB of address space: 32 MB of pagemap entries


def _entries(fd: int, first: int, n: int, chunk: int = 1 << 16):
    """The pagemap entries of pages first.. first+n, read a chunk at a time, then a 0."""
    for at in range(first, first + n, chunk):
        k = min(chunk, first + n - at)
        yield from struct.unpack(f"<{k}Q", os.pread(fd, 8 * k, at * 8))
    yield 0


def replace_fds(node, plan, old_cwd: str, original: int, proc=None,
                shared: dict | None = None, waited: bool = True) -> None:
    """Give the copy its own open file descriptions, held call pending: files opened
    again, pipes and eventfds made anew with what they hold (read from the original,
    process `original`), epoll instances made anew watching those. In a copy of a
    process tree: `proc`, the copied process (else the node's one), and `shared`, what
    its processes share (tree_plan's keys -> cmc's descriptor), kept by the caller,
    who closes them. `waited`: False when no epoll instance of the original was ever
    waited on (a zygote's): each has every event it was given still to report."""
    nid = next(t for t in node.tasks.threads.values() if t.notif is not None
               and (proc is None or t.proc is proc)).notif.id   # any held: one fd table
    listener = node.tasks.listener
    made: dict[int, int] = {}        # the copy's fd -> cmc's descriptor of its new file
    own: list[int] = []              # cmc's other descriptors of them
    try:
        for item in plan:
            kind = item[0]
            if kind == "file":
                _, fd, path, flags, pos, cloexec = item[:6]
                key = item[6] if len(item) > 6 else None
                if path == old_cwd or path.startswith(old_cwd + "/"):
                    path = node.cwd + path[len(old_cwd):]
                if key is not None and key in shared:
                    _native.place_fd(listener, nid, shared[key], fd, cloexec)
                    continue
                src = os.open(path, flags | os.O_CLOEXEC)
                try:
                    if pos and not flags & os.O_PATH:
                        os.lseek(src, pos, os.SEEK_SET)
                    _native.place_fd(listener, nid, src, fd, cloexec)
                finally:
                    if key is not None:
                        shared[key] = src
                    else:
                        os.close(src)
            elif kind == "pipe":
                ends = item[1]
                if len(item) > 2:            # a tree's: made once for all its processes
                    target, (spid, sfd) = item[2], item[3]
                    if target not in shared:
                        shared[target] = os.pipe2(os.O_CLOEXEC)
                        _fill_pipe(spid, [(sfd, True)], *shared[target])
                    r, w = shared[target]
                else:
                    r, w = os.pipe2(os.O_CLOEXEC)
                    own += (r, w)
                    _fill_pipe(original, ends, r, w)
                for fd, read, nonblock, cloexec in ends:
                    end = os.open(f"/proc/self/fd/{r if read else w}",
                                  (os.O_RDONLY if read else os.O_WRONLY) | nonblock
                                  | os.O_CLOEXEC)
                    made[fd] = end
                    _native.place_fd(listener, nid, end, fd, cloexec)
            elif kind == "map":
                continue                 # mapped again by the fork
            elif kind == "unixdgram":
                _, fd, named, nonblock, cloexec = item
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                made[fd] = sock.detach()
                sock = socket.socket(fileno=made[fd])
                if named:
                    sock.bind("")            # an automatic name, as the original's
                if nonblock:
                    sock.setblocking(False)
                sock.detach()
                _native.place_fd(listener, nid, made[fd], fd, cloexec)
            elif kind == "memfd":
                _, fd, name, pos, cloexec = item
                src = os.open(f"/proc/{original}/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    data = b""
                    while chunk := os.pread(src, 1 << 16, len(data)):
                        data += chunk
                finally:
                    os.close(src)
                made[fd] = os.memfd_create(name, os.MFD_CLOEXEC)
                os.write(made[fd], data)
                os.lseek(made[fd], pos, os.SEEK_SET)
                _native.place_fd(listener, nid, made[fd], fd, cloexec)
            elif kind == "unixhalf":
                _, fd, nonblock, cloexec = item
                end, gone = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                gone.close()
                if nonblock:
                    end.setblocking(False)
                made[fd] = end.detach()
                _native.place_fd(listener, nid, made[fd], fd, cloexec)
            elif kind == "eventfd":
                _, fd, semaphore, nonblock, cloexec = item
                count = _eventfd_count(original, fd)
                efd = os.eventfd(count, os.EFD_CLOEXEC | nonblock
                                 | (os.EFD_SEMAPHORE if semaphore else 0))
                made[fd] = efd
                _native.place_fd(listener, nid, efd, fd, cloexec)
            else:                    # epoll, after what it watches
                _, fd, cloexec, targets = item
                ep = select.epoll()
                try:
                    _native.epoll_fill(ep.fileno(), [(made[tfd], tfd, events, data)
                                                     for tfd, events, data in targets])
                    # An edge-triggered entry reports what is ready once, when added:
                    # the original's did long ago. Taken here, so that the copy's
                    # instance has an event to report only if the original's has.
                    if targets and waited:
                        ep.poll(0, len(targets))
                    theirs = _native.getfd(original, fd)
                    try:
                        if _readable(theirs) != _readable(ep.fileno()):
                            raise NotForkable(f"node {node.name} has an epoll instance with "
                                              "an event not taken yet")
                    finally:
                        os.close(theirs)
                    _native.place_fd(listener, nid, ep.fileno(), fd, cloexec)
                finally:
                    ep.close()
    finally:
        for mine in [*made.values(), *own]:
            os.close(mine)


def _fill_pipe(original: int, ends, r: int, w: int) -> None:
    """The new pipe (r, w) holds what the original's holds, as large a buffer."""
    fd = next(fd for fd, read, *_ in ends if read)
    src = _native.getfd(original, fd)   # a read end, of `original`
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, fcntl.fcntl(src, fcntl.F_GETPIPE_SZ))
        queued = struct.unpack("i", fcntl.ioctl(src, termios.FIONREAD, b"\0" * 4))[0]
        if queued:
            _native.tee(src, w, queued)
    finally:
        os.close(src)


def _eventfd_count(original: int, fd: int) -> int:
    return int(procfs.fdinfo(original, fd)["eventfd-count"], 16)
