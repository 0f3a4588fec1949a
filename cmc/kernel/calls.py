"""Emulated calls that are not about sockets: time, sleeps, randomness, the state
fds 3 and 193 (and writes that go to a virtual socket), exec, the descriptor limit
and the files that show it. (Threads and futexes: threadcalls.py.)"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import resource
import struct

from ..errors import TargetError
from . import _native, shm
from .abi import (AT_FDCWD, DURABLE_FD, IOV_MAX, O_ACCMODE, O_CLOEXEC,
                  REALTIME_CLOCKS, RLIMIT_NOFILE, STATE_FD, TIMER_ABSTIME, VFD_BASE)
from .answer import ANSWERED, CONTINUE, Block, Err, Ret
from .diskcalls import disk_open, disk_write
from .handler import fd_arg, handles, read_iovecs, read_timespec, signed, timespec
from .sockets import close_vfd
from .stream import sock_send, sock_send_bytes
from .syscalls_x86_64 import NR

# -- time ------------------------------------------------------------------------


def clock_value(node, clk: int) -> int | None:
    if clk in REALTIME_CLOCKS:
        return node.realtime_ns()
    if clk in (1, 4, 6, 7, 9):           # MONOTONIC, _RAW, _COARSE, BOOTTIME, _ALARM
        return node.monotonic_ns()
    if clk in (2, 3):                    # CPU-time clocks: logical too
        return node.elapsed_ns
    return None


@handles("clock_gettime")
def sys_clock_gettime(call):
    node, args = call.node, call.args
    value = clock_value(node, signed(args[0]))
    if value is None:
        return Err(errno.EINVAL)
    if not node.write(args[1], timespec(value)):
        return Err(errno.EFAULT)
    return Ret(0)


@handles("gettimeofday")
def sys_gettimeofday(call):
    node, args = call.node, call.args
    ns = node.realtime_ns()
    if args[0] and not node.write(args[0], struct.pack("<qq", ns // 10**9, ns % 10**9 // 1000)):
        return Err(errno.EFAULT)
    if args[1] and not node.write(args[1], struct.pack("<ii", 0, 0)):
        return Err(errno.EFAULT)
    return Ret(0)


@handles("time")
def sys_time(call):
    node, args = call.node, call.args
    secs = node.realtime_ns() // 10**9
    if args[0] and not node.write(args[0], struct.pack("<q", secs)):
        return Err(errno.EFAULT)
    return Ret(secs)


def sleep_block(node, duration_ns: int, rem_addr: int, what: str) -> Block:
    def fired():
        if rem_addr:
            node.write(rem_addr, timespec(0))
        return Ret(0)
    return Block(lambda: None, max(duration_ns, 0), fired, what)


@handles("nanosleep")
def sys_nanosleep(call):
    node, args = call.node, call.args
    ns = read_timespec(node, args[0])
    if ns is None:
        return Err(errno.EINVAL)
    return sleep_block(node, ns, args[1], "nanosleep")


@handles("clock_nanosleep")
def sys_clock_nanosleep(call):
    node, args = call.node, call.args
    clk, flags = signed(args[0]), args[1]
    ns = read_timespec(node, args[2])
    now = clock_value(node, clk)
    if ns is None or now is None:
        return Err(errno.EINVAL)
    if flags & TIMER_ABSTIME:
        ns = ns - now
    block = sleep_block(node, ns, 0 if flags & TIMER_ABSTIME else args[3], "clock_nanosleep")
    return block


# -- randomness ------------------------------------------------------------------
@handles("getrandom")
def sys_getrandom(call):
    node, args = call.node, call.args
    n = min(args[1], 1 << 20)
    if not node.write(args[0], node.random_bytes(n)):
        return Err(errno.EFAULT)
    return Ret(n)


# -- fds 3 and 193, and writes to virtual sockets ----------------------------------
@handles("write", "pwrite64")
def sys_write(call):
    node, args = call.node, call.args
    fd = fd_arg(args[0])
    if fd in (STATE_FD, DURABLE_FD):
        data = node.read(args[1], args[2])
        if data is None:
            return Err(errno.EFAULT)
        node.take_state_bytes(fd, data)
        node.moved = data
        return Ret(len(data))
    if fd < VFD_BASE:               # a page cache sees writes from fd 3 up (filter.py)
        return disk_write(call, fd, lambda: node.read(args[1], args[2]))
    return sock_send(node, fd, args[1], args[2], 0, "write")


@handles("writev", "pwritev", "pwritev2")
def sys_writev(call):
    node, args = call.node, call.args
    fd = fd_arg(args[0])
    if fd < VFD_BASE and fd not in (STATE_FD, DURABLE_FD):
        return disk_write(call, fd, lambda: read_iovecs(node, args[1], args[2]))
    if args[2] > IOV_MAX:
        return Err(errno.EINVAL)
    data = read_iovecs(node, args[1], args[2])
    if data is None:
        return Err(errno.EFAULT)
    if fd in (STATE_FD, DURABLE_FD):
        node.take_state_bytes(fd, data)
        node.moved = data
        return Ret(len(data))
    return sock_send_bytes(node, fd, data, 0, "writev")


# -- exec and processes --------------------------------------------------------------
@handles("execve", "execveat")
def sys_execve(call):
    node, args = call.node, call.args
    notif = call.notif
    if notif.nr == NR["execveat"]:
        path = node.read_cstr(args[1])
        dirfd = fd_arg(args[0])
        if path is not None and not path.startswith(b"/") and dirfd != -100:
            return CONTINUE          # relative to a directory fd: rare, let it run
    else:
        path = node.read_cstr(args[0])
    if path is None:
        return Err(errno.EFAULT)
    full = path if path.startswith(b"/") else os.path.join(f"/proc/{notif.pid}/cwd".encode(), path)
    if not os.path.exists(full):
        return Err(errno.ENOENT)
    if not os.access(full, os.X_OK) or os.path.isdir(full):
        return Err(errno.EACCES)
    try:
        outcome, status = _native.exec_continue(node.listener, notif.id, notif.pid,
                                                _exec_seed(node), 5000)
    except OSError as e:
        raise TargetError(node.cluster.where(node) +
                          f"execve({path.decode(errors='replace')}) could not be traced: "
                          f"{e.strerror}") from None
    node.exec_count += 1
    if outcome == 2:      # the program died during exec; C has reaped it
        node.pid = 0
        raise TargetError(node.cluster.where(node) +
                          f"died during execve({path.decode(errors='replace')}) "
                          f"(wait status {status:#x})")
    if outcome == 0:      # close-on-exec virtual fds go away with the old image
        for fd in sorted(node.cloexec):
            close_vfd(node, fd)
    return ANSWERED


def _exec_seed(node) -> bytes:
    return hashlib.blake2b(f"cmc-auxv/{node.index}/{node.incarnation}/{node.exec_count}".encode(),
                           digest_size=16).digest()


# -- the descriptor limit ---------------------------------------------------------------
# The real RLIMIT_NOFILE of a node is VFD_BASE, so that the kernel never hands out a
# real descriptor among the virtual ones. The program is shown an emulated limit
# instead (node.nofile, the kernel's own defaults at first: see node.NOFILE_START),
# above every virtual descriptor cmc hands it, by getrlimit, prlimit64, sysconf
# (which asks prlimit64) and /proc/self/limits: a program that sizes a table by its
# limit and indexes it by descriptor is never corrupted.


def set_nofile(node, soft: int, hard: int):
    """setrlimit(RLIMIT_NOFILE) as Linux does it for a process without
    CAP_SYS_RESOURCE; None when done, else the Err. A real limit lowered below
    VFD_BASE is applied to the process too (its real descriptors must obey it)."""
    if soft > hard:
        return Err(errno.EINVAL)
    if hard > node.nofile[1]:
        return Err(errno.EPERM)
    node.nofile = (soft, hard)
    if node.pid:
        try:
            resource.prlimit(node.pid, resource.RLIMIT_NOFILE, (min(soft, VFD_BASE), VFD_BASE))
        except OSError:
            pass
    return None


def _pack_rlimit(limit: tuple[int, int]) -> bytes:
    return struct.pack("<QQ", *limit)


def _read_rlimit(node, addr: int) -> tuple[int, int] | None:
    raw = node.read(addr, 16)
    return struct.unpack("<QQ", raw) if raw and len(raw) == 16 else None


@handles("getrlimit")
def sys_getrlimit(call):
    node, args = call.node, call.args
    if args[0] != RLIMIT_NOFILE:
        return CONTINUE
    return Ret(0) if node.write(args[1], _pack_rlimit(node.nofile)) else Err(errno.EFAULT)


@handles("setrlimit")
def sys_setrlimit(call):
    node, args = call.node, call.args
    if args[0] != RLIMIT_NOFILE:
        return CONTINUE
    new = _read_rlimit(node, args[1])
    if new is None:
        return Err(errno.EFAULT)
    return set_nofile(node, *new) or Ret(0)


@handles("prlimit64")
def sys_prlimit64(call):
    node, args = call.node, call.args
    pid = args[0] & 0xFFFFFFFF
    if args[1] != RLIMIT_NOFILE or pid not in (0, node.pid, call.pid):
        return CONTINUE
    new = None
    if args[2]:
        new = _read_rlimit(node, args[2])
        if new is None:
            return Err(errno.EFAULT)
    if args[3] and not node.write(args[3], _pack_rlimit(node.nofile)):
        return Err(errno.EFAULT)
    return (set_nofile(node, *new) if new else None) or Ret(0)


_PROC_LIMITS = re.compile(rb"/proc/(self|thread-self|\d+)(/task/\d+)?/limits")
_NOFILE_LINE = re.compile(rb"^Max open files .*$", re.M)


@handles("open", "openat", "openat2")
def sys_open(call):
    """Only opens whose path contains "limits", "random" or "/dev/shm/", or with
    O_TRUNC or O_CREAT, come here (filter.PASS_OPEN): a truncation or a new name is the
    disk model's (diskcalls.py); a POSIX shared-memory object is the world's (shm.py);
    the limits file of a node's own process shows its emulated descriptor limit, and
    the files of randomness give the node's random stream."""
    node, args = call.node, call.args
    notif = call.notif
    if notif.nr == NR["open"]:
        dirfd, path, flags = AT_FDCWD, node.read_cstr(args[0]), args[1]
    else:
        dirfd, path = fd_arg(args[0]), node.read_cstr(args[1])
        if notif.nr == NR["openat2"]:
            how = node.read(args[2], 8)
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
        where = "cwd" if dirfd == AT_FDCWD else f"fd/{dirfd}"
        try:
            path = os.path.join(os.readlink(f"/proc/{notif.pid}/{where}").encode(), path)
        except OSError:
            return CONTINUE
    path = os.path.normpath(path)
    if path in _RANDOM_FILES:
        return _answer_with(call, "random", _RANDOM_FILES[path](node), flags)
    m = _PROC_LIMITS.fullmatch(path)
    if m is None or m.group(1) not in (b"self", b"thread-self", str(node.pid).encode(),
                                       str(notif.pid).encode()):
        return CONTINUE             # not this node's limits
    try:
        with open(f"/proc/{node.pid}/limits", "rb") as f:
            text = f.read()
    except OSError:
        return CONTINUE
    soft, hard = node.nofile
    line = b"%-25s %-20d %-20d %-10s " % (b"Max open files", soft, hard, b"files")
    return _answer_with(call, "limits", _NOFILE_LINE.sub(line, text), flags)


def _open_mode(call) -> int:
    """The mode argument of an open call (openat2: the open_how's second field)."""
    nr, args = call.notif.nr, call.args
    if nr == NR["open"]:
        return args[2]
    if nr == NR["openat"]:
        return args[3]
    how = call.node.read(args[2], 16)
    return struct.unpack("<QQ", how)[1] if how and len(how) == 16 else 0


def _answer_with(call, name: str, content: bytes, flags: int):
    """Answer an open with a read-only file of `content` (a memfd)."""
    memfd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(memfd, content)
        os.lseek(memfd, 0, os.SEEK_SET)
        _native.addfd(call.node.listener, call.id, memfd, cloexec=bool(flags & O_CLOEXEC))
    except OSError:
        return CONTINUE
    finally:
        os.close(memfd)
    return ANSWERED


def _uuid(node) -> bytes:
    b = bytearray(node.random_bytes(16))
    b[6], b[8] = (b[6] & 0x0F) | 0x40, (b[8] & 0x3F) | 0x80      # version 4, RFC 4122
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}\n".encode()


# Where a program reads randomness from a file: the node's random stream instead (SPEC
# §8: the same on every run), like getrandom. A read past URANDOM_BYTES sees the end
# of the file. boot_id is one fixed value (it differs between machines).
URANDOM_BYTES = 65536
_RANDOM_FILES = {
    b"/dev/urandom": lambda node: node.random_bytes(URANDOM_BYTES),
    b"/dev/random": lambda node: node.random_bytes(URANDOM_BYTES),
    b"/proc/sys/kernel/random/uuid": _uuid,
    b"/proc/sys/kernel/random/boot_id": lambda node: b"c3c3c3c3-0000-4000-8000-00000000c3c3\n",
}


@handles("close_range")
def sys_close_range(call):
    node, args = call.node, call.args
    first, last = args[0] & 0xFFFFFFFF, args[1] & 0xFFFFFFFF
    for fd in sorted(node.fds):
        if first <= fd <= last:
            if args[2] & 4:   # CLOSE_RANGE_CLOEXEC
                node.cloexec.add(fd)
            else:
                close_vfd(node, fd)
    return CONTINUE

