"""What every call handler uses: the `Call` it answers, the error for a call cmc does
not support, and reading a call's arguments out of the node's memory. (Which handler
answers which call is the call's row in linux/syscalls.py: a function `sys_*` of a
module of calls/, resolved by dispatch.py.)

A handler takes the `Call` it answers -- the node that made it, the notification
(number, arguments, the thread that made it, the id the answer goes to), the
network -- and returns an answer (answer.py). Nothing about the call being answered
is kept on the node: a handler knows only what it is given.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ...errors import TargetError
from ..linux.abi import IOV_MAX
from ..linux.syscalls import NAME


@dataclass(frozen=True)
class Call:
    """One notified system call, as its handler sees it."""
    proc: object            # the Process that made it (proc/tasks.py): its descriptors,
                            # its memory, its limit; `.node`, the node it is a process of
    notif: object           # the notification: .nr, .args, .pid (the thread), .id

    @property
    def node(self):
        """The node of the calling process (proc/node.py): its clocks, disk, state
        lines, and its scheduler (`node.tasks`)."""
        return self.proc.node

    @property
    def nr(self) -> int:
        return self.notif.nr

    @property
    def args(self) -> tuple:
        return self.notif.args

    @property
    def pid(self) -> int:
        """The thread that made the call (the process's pid for its first thread)."""
        return self.notif.pid

    @property
    def id(self) -> int:
        """What the answer (or a descriptor placed for it) is addressed to."""
        return self.notif.id

    @property
    def net(self):
        return self.proc.node.net

    @property
    def listener(self) -> int:
        """The node's seccomp listener: where an answer, or a descriptor placed for the
        call, goes."""
        return self.proc.node.tasks.listener


def unsupported(who, nr: int, args, why: str = "is not supported on a virtual socket",
                first_is_fd: bool = True):
    """Stop with a target error naming the node (`who`: the Process that made the call,
    or the Call, which also names the thread when the node has more than one), the call
    and its first arguments."""
    call = who if isinstance(who, Call) else None
    node = (call.proc if call is not None else who).node
    tasks = node.tasks
    thread = caller(call) if call is not None else None
    name = NAME.get(nr, f"syscall {nr}")
    shown = ", ".join(str(signed(a)) if i == 0 and first_is_fd else hex(a)
                      for i, a in enumerate(args[:3]))
    by = f"{tasks.who(thread)} " if thread is not None else ""
    raise TargetError(node.where() + f"{by}called {name}({shown}, ...), "
                      f"which {why}")


def caller(call):
    """The thread that made `call`, when messages must name it (its node has more than
    one thread or process), else None."""
    tasks = call.proc.node.tasks
    if len(tasks.threads) > 1 or tasks.next_proc > 1:
        return tasks.thread_of(call.pid)
    return None


def signed(v: int) -> int:
    """The low 32 bits of an argument as a C int."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def signed64(v: int) -> int:
    """An argument as a 64-bit signed integer (loff_t, long)."""
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v & (1 << 63) else v


def fd_arg(v: int) -> int:
    return signed(v)


def timespec(ns: int) -> bytes:
    return struct.pack("<qq", ns // 10**9, ns % 10**9)


def read_timespec(proc, addr: int) -> int | None:
    raw = proc.read(addr, 16)
    if raw is None or len(raw) != 16:
        return None
    sec, nsec = struct.unpack("<qq", raw)
    if sec < 0 or not 0 <= nsec < 10**9:
        return None
    return sec * 10**9 + nsec


def read_iovecs(proc, addr: int, count: int) -> bytes | None:
    if count > IOV_MAX:
        return None
    raw = proc.read(addr, 16 * count)
    if raw is None or len(raw) != 16 * count:
        return None
    out = b""
    for i in range(count):
        base, length = struct.unpack_from("<QQ", raw, 16 * i)
        if length:
            chunk = proc.read(base, length)
            if chunk is None:
                return None
            out += chunk
    return out
