"""POSIX shared memory as the node's own (docs/target-contract.md, "Shared memory").

A program names a POSIX shared-memory object or named semaphore by a path of one
component under /dev/shm (glibc's shm_open, shm_unlink and sem_open open, unlink, link
and rename `/dev/shm/NAME`). Run natively, every world of a run and every run on the
machine would share one object of each name, and nothing would remove it. So cmc
answers those calls itself on a folder of the node's world instead, beside the node's
directory: `<node directory>.shm/NAME`. The object is then the world's: a copy of the
world copies the folder, a CRASH empties it (shared memory does not survive the
machine), and it goes with the world's directories, however cmc ends.

SysV IPC objects (shmget, semget, msgget) and POSIX message queues are the node's by
another way: each node's launch makes it an IPC namespace of its own (csrc,
cmc_spawn), gone with its last process; where cmc may not make one, the SysV calls
are refused (exit 3). A world whose node maps a SysV segment or a shared-memory object
is replayed, not copied (fork.py: a copy would share the mapping).

An AF_UNIX socket bound outside the node's directory (or to an abstract name) would
be every world's too: that bind is refused (exit 3), naming the path.

An open of such a path is opened by cmc (same flags and mode) and its descriptor
given to the node (SECCOMP_IOCTL_NOTIF_ADDFD); unlink, link and rename between such
paths are done by cmc. A call that mixes one with another path (a rename out of
/dev/shm) is refused (exit 3).
"""
from __future__ import annotations

import errno
import os
import shutil

from ..linux import _native, procfs
from ..world.content import copy_tree
from .answer import ANSWERED, CONTINUE, Err, Ret
from .handler import unsupported

SHM_DIR = b"/dev/shm/"
O_CREAT, O_CLOEXEC = 0o100, 0o2000000


def shm_name(path: bytes | None) -> str | None:
    """NAME when path (absolute, normalised) is /dev/shm/NAME of one component that is
    not a cmc scratch directory (a node's own directory may lie in one), else None."""
    if path is None or not path.startswith(SHM_DIR):
        return None
    name = path[len(SHM_DIR):]
    if not name or b"/" in name or name in (b".", b".."):
        return None
    if name.startswith(b"cmc-") and os.path.isdir(path):
        return None
    return os.fsdecode(name)


def folder(node) -> str:
    """Where the node's shared-memory objects are: beside its directory."""
    return node.cwd + ".shm"


def real_path(proc, name: str) -> str:
    return os.path.join(folder(proc.node), name)


def open_object(call, name: str, flags: int, mode: int):
    """Answer an open of /dev/shm/NAME with the world's object."""
    proc = call.proc
    if flags & O_CREAT:
        os.makedirs(folder(proc.node), exist_ok=True)
    try:
        fd = os.open(real_path(proc, name), (flags & ~O_CLOEXEC) | os.O_CLOEXEC, mode & 0o7777)
    except OSError as e:
        return Err(e.errno or errno.EIO)
    try:
        _native.addfd(call.listener, call.id, fd, cloexec=bool(flags & O_CLOEXEC))
    except OSError as e:
        return Err(e.errno or errno.EIO)
    finally:
        os.close(fd)
    return ANSWERED


def name_call(call, nr_name: str, paths: list[bytes | None]):
    """unlink/link/rename (any form) with these resolved paths: the answer when any
    of them is a shared-memory object, else None (the call is not about one)."""
    names = [shm_name(p) for p in paths]
    if not any(names):
        return None
    if not all(names):
        return unsupported(call, call.nr, call.args,
                           "moves a name between /dev/shm and another folder, which cmc "
                           "does not follow (a shared-memory object is the world's)")
    proc = call.proc
    real = [real_path(proc, n) for n in names]
    try:
        if nr_name.startswith("unlink"):
            os.unlink(real[0])
        elif nr_name.startswith("link"):
            os.link(real[0], real[1])
        else:
            os.rename(real[0], real[1])
    except OSError as e:
        return Err(e.errno or errno.EIO)
    return Ret(0)


def forget(node) -> None:
    """A CRASH: the node's shared memory is gone with its machine."""
    shutil.rmtree(folder(node), ignore_errors=True)


def copy(old_cwd: str, new_cwd: str) -> None:
    """A copy of the world: the objects are copied with the node's directory."""
    if os.path.isdir(old_cwd + ".shm"):
        copy_tree(old_cwd + ".shm", new_cwd + ".shm")


def sys_sysv_get(call):
    """SysV IPC objects are the node's when it has an IPC namespace of its own (its
    launch made one: csrc, cmc_spawn); without, they would be shared by every world
    and outlive cmc: refused."""
    if _native.private_ipc() == 1:
        return CONTINUE
    return unsupported(call, call.nr, call.args,
                       "makes a SysV IPC object, which every world would share and which "
                       "would outlive cmc: cmc gives each node an IPC namespace of its own "
                       "only where it may make one (run it as root, or with CAP_SYS_ADMIN)",
                       first_is_fd=False)


AF_UNIX = 1


def unix_bind(call):
    """bind of a real socket: an AF_UNIX name outside the node's directory would be
    a file (or an abstract name) that every world of the run shares and that outlives
    it: refused. Anything else runs natively."""
    proc, args = call.proc, call.args
    raw = proc.read(args[1], min(args[2], 110))
    if raw is None or len(raw) < 3 or int.from_bytes(raw[:2], "little") != AF_UNIX:
        return CONTINUE
    name = raw[2:].split(b"\0", 1)[0] if raw[2] else None
    if name is None:
        where = "an abstract AF_UNIX name, which every world of the run shares"
    else:
        path = name if name.startswith(b"/") else os.path.join(
            procfs.directory(call.pid), name)
        real = os.path.realpath(os.path.dirname(os.fsdecode(path)))
        if real == proc.node.cwd or real.startswith(proc.node.cwd + "/"):
            return CONTINUE
        where = (f"an AF_UNIX socket at {os.fsdecode(path)}, outside its directory: a "
                 "file every world of the run would share and that would outlive it")
    return unsupported(call, call.nr, args, f"binds {where} (make the program bind it "
                       "in its directory, e.g. PostgreSQL's -k .)")
