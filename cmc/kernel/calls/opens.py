"""open, openat and openat2, of the few paths that come to cmc (filter.PASS_OPEN):
a truncation or a new name goes to the disk model (files.py), a POSIX shared-memory
object to the world (shm.py), the limits file of a node's process and the files of
randomness are made up by cmc (limits.py, time.py); the rest runs natively."""
from __future__ import annotations

import os
import re
import struct

from ..linux import _native, procfs
from ..linux.abi import AT_FDCWD, O_ACCMODE, O_CLOEXEC
from ..linux.syscalls import NR
from . import shm
from .answer import ANSWERED, CONTINUE
from .files import disk_open
from .handler import fd_arg
from .limits import limits_text
from .figures import FIGURE_FILES, proc_self_text
from .machine import MACHINE_FILES
from .time import RANDOM_FILES

_PROC_LIMITS = re.compile(rb"/proc/(self|thread-self|\d+)(/task/\d+)?/limits")


def sys_open(call):
    """Only opens whose path contains "limits", "random" or "/dev/shm/", or with
    O_TRUNC or O_CREAT, come here (filter.PASS_OPEN): a truncation or a new name is the
    disk model's (files.py); a POSIX shared-memory object is the world's (shm.py);
    the limits file of a node's own process shows its emulated descriptor limit, and
    the files of randomness give the node's random stream."""
    proc, args = call.proc, call.args
    notif = call.notif
    if notif.nr == NR["open"]:
        dirfd, path, flags = AT_FDCWD, proc.read_cstr(args[0]), args[1]
    else:
        dirfd, path = fd_arg(args[0]), proc.read_cstr(args[1])
        if notif.nr == NR["openat2"]:
            how = proc.read(args[2], 8)
            flags = struct.unpack("<Q", how)[0] if how and len(how) == 8 else 0
        else:
            flags = args[2]
    disk_open(call, dirfd, path, flags)
    if path is None:
        return CONTINUE             # the kernel says EFAULT
    if path.startswith(shm.SHM_DIR):
        # a POSIX shared-memory object (glibc names them so): the world's (shm.py)
        name = shm.shm_name(os.path.normpath(path))
        if name is not None:
            return shm.open_object(call, name, flags, _open_mode(call))
    if flags & O_ACCMODE:
        return CONTINUE             # the kernel refuses to write what is emulated below
    if not path.startswith(b"/"):
        try:
            path = os.path.join(procfs.directory(notif.pid, None if dirfd == AT_FDCWD
                                                 else dirfd), path)
        except OSError:
            return CONTINUE
    path = os.path.normpath(path)
    if path in RANDOM_FILES:
        return _answer_with(call, "random", RANDOM_FILES[path](proc), flags)
    if path in MACHINE_FILES:
        return _answer_with(call, "machine", MACHINE_FILES[path](proc), flags)
    if path in FIGURE_FILES:
        return _answer_with(call, "figures", FIGURE_FILES[path](proc), flags)
    if path.endswith((b"/stat", b"/statm", b"/status")):
        text = proc_self_text(call, path)
        return CONTINUE if text is None else _answer_with(call, "figures", text, flags)
    m = _PROC_LIMITS.fullmatch(path)
    if m is None or m.group(1) not in (b"self", b"thread-self", *(
            b"%d" % p for p in (notif.pid, *proc.node.tasks.known_pids(proc)))):
        return CONTINUE             # not this node's limits
    text = limits_text(proc)
    if text is None:
        return CONTINUE
    return _answer_with(call, "limits", text, flags)


def _open_mode(call) -> int:
    """The mode argument of an open call (openat2: the open_how's second field)."""
    nr, args = call.notif.nr, call.args
    if nr == NR["open"]:
        return args[2]
    if nr == NR["openat"]:
        return args[3]
    how = call.proc.read(args[2], 16)
    return struct.unpack("<QQ", how)[1] if how and len(how) == 16 else 0


def _answer_with(call, name: str, content: bytes, flags: int):
    """Answer an open with a read-only file of `content` (a memfd)."""
    memfd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(memfd, content)
        os.lseek(memfd, 0, os.SEEK_SET)
        _native.addfd(call.listener, call.id, memfd, cloexec=bool(flags & O_CLOEXEC))
    except OSError:
        return CONTINUE
    finally:
        os.close(memfd)
    return ANSWERED
