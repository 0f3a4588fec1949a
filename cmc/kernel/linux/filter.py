"""The seccomp filter every node runs under: which calls cmc sees.

The policy lives here, in Python; csrc/ only installs the instructions it is given.
A call is *notified* (cmc answers it) when it can touch what cmc emulates:

- always: socket creation (AF_INET/AF_INET6 become virtual), the clock and sleeps
  (time is logical), poll/select/epoll_wait (their fds are in memory), getrandom,
  execve (to hide the vDSO at every exec), thread and process creation (cmc
  finds the new task), leaving the node's process group or namespaces (refused),
  what threads wait and give way in (futex, sched_yield) and how one ends
  (exit: the process's end is exit_group), what tells the machine (CPUs, memory,
  host name: the model's), and the calls a new thread and its
  creator make first (rt_sigprocmask, sigaltstack: a point where cmc holds each
  until the threads before it block), the calls that would act on the host (refused,
  or checked to name a process of the node: calls/host.py), and the rlimit calls (real fds stay below 500 under a real limit of 500,
  while the program is shown a limit above every virtual descriptor);
- opening a file, so that /proc/self/limits shows that limit too, /dev/urandom
  gives the node's random stream and /dev/shm/NAME is the world's object; every open
  whose path contains none of "limits", "random" and "/dev/shm/" is answered in C
  with CONTINUE (PASS_OPEN), without a round trip into Python; and unlink, link and
  rename (a shared-memory object's name);
- rt_sigaction of SIGSEGV, unless made from the trap page (the handler that makes
  rdtsc cmc's takes SIGSEGV: the program's own action is kept by cmc, calls/tsc.py);
- madvise with MADV_DONTFORK or MADV_WIPEONFORK (cmc copies a process by a fork:
  calls/memory.py);
- when an fd argument, read as a signed 32-bit int, is >= 500 (a virtual socket);
  writes also when the fd is 3 or 193 (the state channels cmc takes synchronously),
  and fcntl and the dup family on fd 3 or 193 (a copy of them would escape cmc).

Everything else runs natively, so files, pipes and AF_UNIX sockets cost nothing.
io_uring is refused with ENOSYS: it would be a way around every interception.

Which call is in which of these classes is its row's `notified`, `fds` and `disk`
(syscalls.py); the rows are tested in the table's order.
"""
from __future__ import annotations

import errno

from .abi import (DURABLE_FD, MADV_DONTFORK, MADV_WIPEONFORK, SIGSEGV, STATE_FD,
                  TRAP_BIRTH_AT, TRAP_PAGE, TRAP_PAGE_SIZE, TRAP_UNTRACED_AT, VFD_BASE)
from .syscalls import ALWAYS, ENOSYS, FD, FD3UP, FORK_ADVICE, MMAP, ROWS, SEGV, STATE

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_USER_NOTIF = 0x7FC00000
RET_ERRNO = 0x00050000

LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JA = 0x05
RET_K = 0x06

OFF_NR = 0
OFF_ARCH = 4
OFF_IP_LO, OFF_IP_HI = 8, 12


def _off_arg(i: int) -> int:
    return 16 + 8 * i   # low 32 bits of args[i] on little endian


# open calls answered in C unless their flags (the second number: an argument, or
# -k: what argument k-1 points to) have O_TRUNC or O_CREAT (the disk model sees a
# truncation, a new name)
# or their path (the first number: an argument) contains one of PASS_NEEDLES:
# /proc/self/limits (the emulated descriptor limit), /dev/urandom, /dev/random and
# /proc/sys/kernel/random/{uuid,boot_id} (randomness is the node's), POSIX
# shared-memory objects, /dev/shm/NAME (the world's: shm.py), and the files that
# describe the machine (CPUs, memory, host name: the model's, calls/machine.py) and its
# state (/proc/self/stat, statm, status, /proc/stat, loadavg, uptime: calls/figures.py)
PASS_OPEN = {row.nr: (row.paths[0][1], row.flags) for row in ROWS if row.flags is not None}
PASS_FLAGS = 0o1000 | 0o100    # O_TRUNC, O_CREAT
PASS_NEEDLES = (b"limits", b"random", b"/dev/shm/", b"/sys/devices/system/cpu/", b"cpuinfo",
                b"meminfo", b"hostname", b"/etc/hosts", b"/etc/resolv.conf",
                b"/etc/nsswitch.conf", b"/stat", b"loadavg", b"uptime")
# where a call notified on a descriptor goes, by its class and its descriptor arguments:
# the writes and the dup family also when the fd is 3 or 193 (a copy of the state fds
# would let state escape cmc)
FD_CHECKS = {(FD, (0,)): "arg0", (STATE, (0,)): "write", (STATE, (0, 1)): "dup2",
             (FD, (0, 1)): "arg01", (FD, (2,)): "arg2"}
# With a page cache, a call's `disk` (syscalls.py) comes first: what makes a file durable
# or makes or removes a name, always; a write through a descriptor from 3 up (a file of
# the node's directory is told apart in Python: readlink of the descriptor); a shared
# writable mmap of a descriptor.
DISK_CHECKS = {ALWAYS: "notify", FD3UP: "fd3up", MMAP: "mmap"}
MAP_SHARED = 0x01
PROT_WRITE = 0x02
JSET_K = 0x45

class _Asm:
    """A tiny classic-BPF assembler with labels (conditional jumps reach 255 ahead;
    longer jumps go through `ja`, whose offset is 32 bits)."""

    def __init__(self) -> None:
        self.code: list[list] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def ld(self, off: int) -> None:
        self.code.append([LD_W_ABS, 0, 0, off])

    def jump(self, op: int, k: int, jt, jf) -> None:
        self.code.append([op, jt, jf, k])

    def ja(self, target: str) -> None:
        self.code.append([JA, 0, 0, target])

    def ret(self, value: int) -> None:
        self.code.append([RET_K, 0, 0, value])

    def assemble(self) -> list[tuple[int, int, int, int]]:
        out = []
        for pc, (op, jt, jf, k) in enumerate(self.code):
            def rel(t):
                if isinstance(t, int):
                    return t
                d = self.labels[t] - pc - 1
                if not 0 <= d <= 255:
                    raise AssertionError(f"BPF jump to {t} out of range")
                return d
            if op == JA:
                k = self.labels[k] - pc - 1
            else:
                jt, jf = rel(jt), rel(jf)
            out.append((op, jt, jf, k))
        return out


def _fd_check(a: _Asm, arg: int, notify: str, otherwise: str | int,
              stdio: bool = False) -> None:
    """Jump to `notify` when (int32)args[arg] >= VFD_BASE (with `stdio`, also when it is
    0 or 1), else to `otherwise`."""
    a.ld(_off_arg(arg))
    a.jump(JGE_K, 0x80000000, otherwise, 0)    # negative: AT_FDCWD, -1
    if stdio:
        a.jump(JGE_K, VFD_BASE, notify, 0)
        a.jump(JGE_K, 2, otherwise, notify)
    else:
        a.jump(JGE_K, VFD_BASE, notify, otherwise)


def build_filter(disk: bool = False, stdio: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter; with `disk`, the one for a page cache (DISK_* above); with `stdio`, the
    one for a node whose stdin and stdout are cmc's (a Maelstrom node, kernel/maelstrom.py):
    every call above that takes a descriptor is notified for fds 0 and 1 too."""
    a = _Asm()
    a.ld(OFF_ARCH)
    a.jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0)
    a.ret(RET_KILL_PROCESS)
    # a call cmc injects (at the trap page's untraced `syscall`; the IP is past it)
    # (or at its second, which the code there that makes a copy's threads calls)
    a.ld(OFF_IP_HI)
    a.jump(JEQ_K, TRAP_PAGE >> 32, 0, 4)
    a.ld(OFF_IP_LO)
    a.jump(JEQ_K, (TRAP_PAGE + TRAP_UNTRACED_AT + 2) & 0xFFFFFFFF, 1, 0)
    a.jump(JEQ_K, (TRAP_PAGE + TRAP_BIRTH_AT + 2) & 0xFFFFFFFF, 0, 1)
    a.ret(RET_ALLOW)
    a.ld(OFF_NR)
    a.jump(JGE_K, X32_BIT, 0, 1)
    a.ja("enosys")
    groups = [(lambda r: r.notified == ALWAYS, "notify"),
              (lambda r: r.notified == ENOSYS, "enosys"), (lambda r: r.notified == SEGV, "segv"),
              (lambda r: r.notified == FORK_ADVICE, "madvise")]
    if disk:
        groups += [(lambda r, d=d: r.disk == d, target) for d, target in DISK_CHECKS.items()]
    groups += [(lambda r, c=c: (r.notified, r.fds) == c, target)
               for c, target in FD_CHECKS.items()]
    placed: set = set()
    for test, target in groups:
        for row in ROWS:
            if row.nr in placed or not test(row):
                continue
            placed.add(row.nr)
            a.jump(JEQ_K, row.nr, 0, 1)
            a.ja(target)
    unplaced = [r.name for r in ROWS if r.notified in (FD, STATE) and r.nr not in placed]
    if unplaced:
        raise AssertionError(f"no filter check for the descriptors of {unplaced}")
    a.ret(RET_ALLOW)

    if disk:
        a.label("fd3up")
        a.ld(_off_arg(0))
        a.jump(JGE_K, 0x80000000, "allow", 0)
        a.jump(JGE_K, 3, "notify", 0 if stdio else "allow")
        if stdio:
            a.jump(JGE_K, 2, "allow", "notify")
        a.label("mmap")
        a.ld(_off_arg(3))
        a.jump(JSET_K, MAP_SHARED, 0, "allow")
        a.ld(_off_arg(2))
        a.jump(JSET_K, PROT_WRITE, 0, "allow")
        a.ld(_off_arg(4))
        a.jump(JGE_K, 0x80000000, "allow", "notify")

    a.label("segv")             # rt_sigaction(SIGSEGV) from outside the trap page
    a.ld(_off_arg(0))
    a.jump(JEQ_K, SIGSEGV, 0, "allow")
    a.ld(OFF_IP_HI)
    a.jump(JEQ_K, TRAP_PAGE >> 32, 0, "notify")
    a.ld(OFF_IP_LO)
    a.jump(JGE_K, TRAP_PAGE & 0xFFFFFFFF, 0, "notify")
    a.jump(JGE_K, (TRAP_PAGE & 0xFFFFFFFF) + TRAP_PAGE_SIZE, "notify", "allow")

    a.label("madvise")          # advice a fork would act on
    a.ld(_off_arg(2))
    a.jump(JEQ_K, MADV_DONTFORK, "notify", 0)
    a.jump(JEQ_K, MADV_WIPEONFORK, "notify", "allow")

    a.label("write")            # falls through into arg0
    a.ld(_off_arg(0))
    a.jump(JEQ_K, STATE_FD, "notify", 0)
    a.jump(JEQ_K, DURABLE_FD, "notify", 0)
    a.label("arg0")
    _fd_check(a, 0, "notify", "allow", stdio)
    a.label("dup2")             # falls through into arg01
    a.ld(_off_arg(0))
    a.jump(JEQ_K, STATE_FD, "notify", 0)
    a.jump(JEQ_K, DURABLE_FD, "notify", 0)
    a.label("arg01")
    _fd_check(a, 0, "notify", 0, stdio)
    _fd_check(a, 1, "notify", "allow", stdio)
    a.label("arg2")
    _fd_check(a, 2, "notify", "allow", stdio)

    a.label("notify")
    a.ret(RET_USER_NOTIF)
    a.label("allow")
    a.ret(RET_ALLOW)
    a.label("enosys")
    a.ret(RET_ERRNO | errno.ENOSYS)
    return a.assemble()
