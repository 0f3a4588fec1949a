"""Linux's ABI as the call handlers see it (x86_64): descriptor numbers cmc reserves,
and the flag and option values of the calls it emulates. Syscall numbers, and what cmc
makes of each call, are in syscalls.py. The clock classes and the trap page's values below are
also the C helper's: scripts/gen_syscalls.py --abi-header writes them into
csrc/cmc_abi.h (test/test_csrc.py checks it is current)."""
from __future__ import annotations

# Descriptors: virtual sockets are numbered from VFD_BASE (real ones stay below it,
# under a real RLIMIT_NOFILE of VFD_BASE); fds 3 and 193 carry the declared state.
VFD_BASE = 500
STATE_FD = 3
DURABLE_FD = 193

# sockets
SOCK_STREAM, SOCK_DGRAM = 1, 2
SOCK_NONBLOCK, SOCK_CLOEXEC = 0o4000, 0o2000000
MSG_PEEK, MSG_TRUNC, MSG_DONTWAIT, MSG_WAITALL, MSG_NOSIGNAL = 0x2, 0x20, 0x40, 0x100, 0x4000
MSG_WAITFORONE = 0x10000
SOL_SOCKET, IPPROTO_TCP = 1, 6
SO_TYPE, SO_ERROR, SO_RCVTIMEO, SO_SNDTIMEO = 3, 4, 20, 21
SO_REUSEADDR, SO_BROADCAST, SO_SNDBUF, SO_RCVBUF, SO_KEEPALIVE = 2, 6, 7, 8, 9
SO_OOBINLINE, SO_LINGER, SO_REUSEPORT, SO_ACCEPTCONN = 10, 13, 15, 30
SO_PROTOCOL, SO_DOMAIN = 38, 39
IPPROTO_IPV6, IPV6_V6ONLY = 41, 26
TCP_NODELAY, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT = 1, 4, 5, 6

# readiness (poll, select, epoll)
POLLIN, POLLPRI, POLLOUT, POLLERR, POLLHUP, POLLNVAL, POLLRDHUP = 1, 2, 4, 8, 0x10, 0x20, 0x2000
POLLRDNORM, POLLWRNORM = 0x40, 0x100

# descriptors and files
O_NONBLOCK = 0o4000
O_ACCMODE, O_CLOEXEC = 3, 0o2000000
AT_FDCWD = -100
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC = 0, 1, 2, 3, 4, 1030
FIONBIO, FIONREAD = 0x5421, 0x541B
S_IFSOCK = 0o140000
IOV_MAX = 1024
RLIMIT_NOFILE = 7

# time and processes
CLOCK_REALTIME, CLOCK_MONOTONIC = 0, 1
REALTIME_CLOCKS = {0, 5, 8, 11}          # REALTIME, _COARSE, _ALARM, TAI
MONOTONIC_CLOCKS = {1, 4, 6, 7, 9}       # MONOTONIC, _RAW, _COARSE, BOOTTIME, _ALARM
CPUTIME_CLOCKS = {2, 3}                  # PROCESS_CPUTIME_ID, THREAD_CPUTIME_ID
TIMER_ABSTIME = 1

# The TSC trap (docs/design.md, "The TSC is cmc's"): the page the C helper maps into
# every exec'd image (the same address as csrc's CMC_TRAP_PAGE), and the two clock
# ids its SIGSEGV handler asks cmc with: the counter, and the program's own action
# for SIGSEGV.
TRAP_PAGE, TRAP_PAGE_SIZE = 0x7E5A00000000, 4096
# ... and in it, a `syscall` the filter lets through unnotified: where cmc makes the
# calls it injects into a node's stopped threads (csrc's CMC_TRAP_UNTRACED_AT)
TRAP_UNTRACED_AT = 0xFF0
# ... and a second, called by the code there that makes a copy's threads (csrc's
# CMC_TRAP_BIRTH_AT), and the memory of the process's own that code uses, after the page
TRAP_BIRTH_AT = 0xFE0
TRAP_SCRATCH, TRAP_SCRATCH_SIZE = TRAP_PAGE + TRAP_PAGE_SIZE, 128 * 1024
CLOCK_TSC, CLOCK_SEGV_ACTION = 0x434D4354, 0x434D4353
SIGSEGV = 11
# madvise advice a fork acts on (calls/memory.py)
MADV_DONTFORK, MADV_WIPEONFORK = 10, 18
CLONE_THREAD = 0x00010000
CLONE_NEWIPC = 0x08000000
