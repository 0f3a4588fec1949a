"""The clocks, sleeps and randomness a node sees: all of them cmc's, never the
host's, so that a world is the same on every run and machine (docs/target-contract.md,
"Time and randomness"). A sleep is a blocked call whose timeout the environment fires;
getrandom and the files of randomness give the node's own deterministic stream."""
from __future__ import annotations

import errno
import struct

from ..linux.abi import CPUTIME_CLOCKS, MONOTONIC_CLOCKS, REALTIME_CLOCKS, TIMER_ABSTIME
from .answer import Block, Err, Ret
from .handler import read_timespec, signed, timespec
from .tsc import trap_clock


def clock_value(proc, clk: int) -> int | None:
    if clk in REALTIME_CLOCKS:
        return proc.node.realtime_ns()
    if clk in MONOTONIC_CLOCKS:
        return proc.node.monotonic_ns()
    if clk in CPUTIME_CLOCKS:            # logical too
        return proc.node.now_ns()
    return None


def sys_clock_gettime(call):
    proc, args = call.proc, call.args
    value = clock_value(proc, signed(args[0]))
    if value is None:
        return trap_clock(call) or Err(errno.EINVAL)
    if not proc.write(args[1], timespec(value)):
        return Err(errno.EFAULT)
    return Ret(0)


def sys_gettimeofday(call):
    proc, args = call.proc, call.args
    ns = proc.node.realtime_ns()
    if args[0] and not proc.write(args[0], struct.pack("<qq", ns // 10**9, ns % 10**9 // 1000)):
        return Err(errno.EFAULT)
    if args[1] and not proc.write(args[1], struct.pack("<ii", 0, 0)):
        return Err(errno.EFAULT)
    return Ret(0)


def sys_time(call):
    proc, args = call.proc, call.args
    secs = proc.node.realtime_ns() // 10**9
    if args[0] and not proc.write(args[0], struct.pack("<q", secs)):
        return Err(errno.EFAULT)
    return Ret(secs)


def sleep_block(proc, duration_ns: int, rem_addr: int, what: str) -> Block:
    def fired():
        if rem_addr:
            proc.write(rem_addr, timespec(0))
        return Ret(0)
    return Block(lambda: None, max(duration_ns, 0), fired, what)


def sys_nanosleep(call):
    proc, args = call.proc, call.args
    ns = read_timespec(proc, args[0])
    if ns is None:
        return Err(errno.EINVAL)
    return sleep_block(proc, ns, args[1], "nanosleep")


def sys_clock_nanosleep(call):
    proc, args = call.proc, call.args
    clk, flags = signed(args[0]), args[1]
    ns = read_timespec(proc, args[2])
    now = clock_value(proc, clk)
    if ns is None or now is None:
        return Err(errno.EINVAL)
    if flags & TIMER_ABSTIME:
        ns = ns - now
    block = sleep_block(proc, ns, 0 if flags & TIMER_ABSTIME else args[3], "clock_nanosleep")
    return block


def sys_getrandom(call):
    proc, args = call.proc, call.args
    n = min(args[1], 1 << 20)
    if not proc.write(args[0], proc.node.random_bytes(n)):
        return Err(errno.EFAULT)
    return Ret(n)



def _uuid(proc) -> bytes:
    b = bytearray(proc.node.random_bytes(16))
    b[6], b[8] = (b[6] & 0x0F) | 0x40, (b[8] & 0x3F) | 0x80      # version 4, RFC 4122
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}\n".encode()


# Where a program reads randomness from a file: the node's random stream instead (the
# same on every run: docs/target-contract.md, "Randomness"), like getrandom. A read past URANDOM_BYTES sees the end
# of the file. boot_id is one fixed value (it differs between machines).
URANDOM_BYTES = 65536
RANDOM_FILES = {
    b"/dev/urandom": lambda proc: proc.node.random_bytes(URANDOM_BYTES),
    b"/dev/random": lambda proc: proc.node.random_bytes(URANDOM_BYTES),
    b"/proc/sys/kernel/random/uuid": _uuid,
    b"/proc/sys/kernel/random/boot_id": lambda proc: b"c3c3c3c3-0000-4000-8000-00000000c3c3\n",
}
