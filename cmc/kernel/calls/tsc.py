"""The TSC is cmc's (docs/design.md, "The TSC is cmc's"). rdtsc and rdtscp are
instructions, not calls: every exec'd image gets, from the C helper, a fault on them
(PR_TSC_SIGSEGV) and a SIGSEGV handler in a page of cmc's that asks, by a notified
clock_gettime with a clock id of cmc's, for the counter -- the node's logical clock,
one tick a nanosecond -- and steps over the instruction. The program's own SIGSEGV
action is kept here, per process: rt_sigaction of SIGSEGV from anywhere but the trap
page is answered by cmc, and the handler asks for that action (the other clock id)
when a SIGSEGV is not a TSC read."""
from __future__ import annotations

import errno
import struct

from ..linux import procfs
from ..linux.abi import CLOCK_SEGV_ACTION, CLOCK_TSC, SIGSEGV, TRAP_PAGE, TRAP_PAGE_SIZE
from .answer import CONTINUE, Err, Ret
from .handler import caller, signed

ACTION_SIZE = 32                # handler, flags, restorer, mask (struct kernel_sigaction)
DEFAULT_ACTION = bytes(ACTION_SIZE)
SIG_IGN = 1
SA_RESETHAND = 0x80000000


def from_trap(call) -> bool:
    return TRAP_PAGE <= call.notif.ip < TRAP_PAGE + TRAP_PAGE_SIZE


def tsc(node) -> int:
    """The counter a node reads: its monotonic clock in nanoseconds (a 1 GHz TSC)."""
    return node.monotonic_ns()


def trap_clock(call):
    """clock_gettime with one of the trap's clock ids: the counter, or the program's
    action (reset first under SA_RESETHAND: its handler is about to run). None when
    the clock id is not one of them."""
    clk = signed(call.args[0])
    if clk not in (CLOCK_TSC, CLOCK_SEGV_ACTION):
        return None
    if not from_trap(call):
        return Err(errno.EINVAL)
    proc = call.proc
    if clk == CLOCK_TSC:
        data = struct.pack("<Q", tsc(proc.node))
    else:
        note_fault(call)
        data = proc.segv
        handler, flags = struct.unpack_from("<QQ", data)
        if handler > SIG_IGN and flags & SA_RESETHAND:
            proc.segv = DEFAULT_ACTION
    if not proc.write(call.args[1], data):
        return Err(errno.EFAULT)
    return Ret(0)


SEGV_CODES = {1: "SEGV_MAPERR: nothing mapped there", 2: "SEGV_ACCERR: not allowed there",
              0x80: "a general protection fault"}


def note_fault(call) -> None:
    """The trap's handler, asking for the program's action, passes the signal's
    siginfo and ucontext: the last fault the kernel made (si_code > 0) in a process is
    kept, to say where it was if the process dies of it (scheduler, "died of signal";
    a signal the program's handler sends on, as Node's does, keeps the fault before it).
    Faults are rare (a JVM search: two), so each is read whole."""
    proc = call.proc
    if not call.args[2] or not call.args[3]:
        return
    info = proc.read(call.args[2], 24)
    ip = proc.read(call.args[3] + 168, 8)            # uc_mcontext.gregs[REG_RIP]
    if info is None or ip is None or len(info) < 24 or len(ip) < 8:
        return
    code = struct.unpack_from("<i", info, 8)[0]
    if code <= 0:                                    # sent, not made by a fault
        return
    addr = struct.unpack_from("<Q", info, 16)[0]
    rip = struct.unpack("<Q", ip)[0]
    at = procfs.mapping_at(proc.pid, rip)
    where = f" ({at[3]}+{rip - at[0] + at[2]:#x})" if at else ""
    what = SEGV_CODES.get(code, f"si_code {code}")
    t = caller(call)
    who = proc.node.tasks.who(t) + ": " if t is not None else ""
    proc.fault = (f"{who}a fault at address {addr:#x} ({what}), instruction at "
                  f"{rip:#x}{where}")


def sys_rt_sigaction(call):
    """rt_sigaction(SIGSEGV, act, oldact, 8) from the program: its action is kept here;
    the kernel's stays the trap's."""
    if from_trap(call) or call.args[0] != SIGSEGV:
        return CONTINUE
    proc, (_, act, old, size) = call.proc, call.args[:4]
    if size != 8:
        return Err(errno.EINVAL)
    new = None
    if act:
        new = proc.read(act, ACTION_SIZE)
        if new is None or len(new) != ACTION_SIZE:
            return Err(errno.EFAULT)
    if old and not proc.write(old, proc.segv):
        return Err(errno.EFAULT)
    if new is not None:
        proc.segv = new
    return Ret(0)


def after_exec(proc) -> None:
    """An exec keeps an ignored SIGSEGV ignored; a handler is gone with the image."""
    handler = struct.unpack_from("<Q", proc.segv)[0]
    if handler != SIG_IGN:
        proc.segv = DEFAULT_ACTION
