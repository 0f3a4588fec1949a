"""The strace-like record of the emulated calls a node made, for `cmc --replay`.

Only a replay that shows a behavior records (Cluster.recording); the search does
not pay for it. Argument names and counts come from python-ptrace's prototype
table; integers are shown signed, pointers in hex, and the bytes a call moved
(sent, received, written to fd 3/193) are shown quoted.
"""
from __future__ import annotations

import errno as errno_mod

from ptrace.syscall.prototypes import SYSCALL_PROTOTYPES

from .answer import ANSWERED, CONTINUE, Err, Ret
from .handler import signed, signed64
from ..world.net import quote
from ..linux.syscalls import NAME


def _arg(ctype: str, value: int) -> str:
    if "*" in ctype or ctype in ("caddr_t",):
        return "NULL" if value == 0 else hex(value)
    if ctype in ("int", "unsigned", "unsigned int", "clockid_t", "pid_t"):
        return str(signed(value))
    return str(signed64(value))


def render(nr: int, args, result, data: bytes | None = None) -> str:
    name = NAME.get(nr, f"syscall_{nr}")
    proto = SYSCALL_PROTOTYPES.get(name)
    params = proto[1] if proto else tuple(("long", f"a{i}") for i in range(3))
    shown = ", ".join(_arg(t, a) for (t, _), a in zip(params, args))
    if result is CONTINUE:
        outcome = "(run natively)"
    elif result is ANSWERED:
        outcome = "(answered)"
    elif isinstance(result, Err):
        outcome = f"= -1 {errno_mod.errorcode.get(result.errno, result.errno)}"
    elif isinstance(result, Ret):
        outcome = f"= {result.val}"
    else:
        outcome = f"= {result}"
    tail = f"  {quote(data[:200])}{'...' if len(data) > 200 else ''}" if data else ""
    return f"{name}({shown}) {outcome}{tail}"
