"""The figures a node reads about its machine's state are the model's, the same on every
launch, copy and replay (docs/target-contract.md, "The machine"): the file system its
directory is on (statfs, fstatfs: `machine disk SIZE`, free space less what the node's
directory holds), its CPU time (getrusage, times: the node's clock, all of it user
time), and the /proc files that report them (/proc/self/stat, statm and status, with
their counters and sizes fixed; /proc/stat, /proc/loadavg, /proc/uptime). Read
natively they change with the host's load, its disk and the moment, and a program that
sizes a store by its free space or reports its CPU use (NATS's JetStream and its
statistics) goes another way on every run."""
from __future__ import annotations

import errno
import os
import re
import struct

from ..linux import procfs
from ..linux.abi import VFD_BASE
from .answer import Err, Ret
from .handler import fd_arg
from .sockets import get_sock

BLOCK = 4096
HZ = 100                      # clock ticks a second (sysconf(_SC_CLK_TCK))
EXT4_MAGIC, SOCKFS_MAGIC = 0xEF53, 0x534F434B
FILES = 1 << 20               # inodes of the node's file system
RSS_KIB = 10240               # a node's resident set, as every figure of it says
VM_KIB = 102400


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _used(node) -> tuple[int, int]:
    """(blocks, files) the node's directory holds: each file's size in whole blocks."""
    blocks = files = 0
    for root, dirs, names in os.walk(node.cwd):
        dirs.sort()
        files += len(dirs) + len(names)
        for name in names:
            try:
                size = os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            blocks += -(-size // BLOCK)
    return blocks, files


def _statfs(node) -> bytes:
    """struct statfs of the node's file system: `machine disk` big, less its files."""
    total = node.setting.spec.disk_bytes // BLOCK
    used, files = _used(node)
    free = max(total - used, 0)
    return struct.pack("<7q2i7q", EXT4_MAGIC, BLOCK, total, free, free, FILES,
                       max(FILES - files, 0), 0, 0, 255, BLOCK, 0x400, 0, 0, 0, 0)


def _sockfs() -> bytes:
    return struct.pack("<7q2i7q", SOCKFS_MAGIC, BLOCK, 0, 0, 0, 0, 0, 0, 0, 255, BLOCK,
                       0, 0, 0, 0, 0)


def _put(call, addr: int, data: bytes):
    return Ret(0) if call.proc.write(addr, data) else Err(errno.EFAULT)


def sys_statfs(call):
    """statfs(path): the node's file system, for any path that exists."""
    path = call.proc.read_cstr(call.args[0])
    if path is None:
        return Err(errno.EFAULT)
    if not path.startswith(b"/"):
        try:
            path = os.path.join(procfs.directory(call.pid, None), path)
        except OSError:
            return Err(errno.ENOENT)
    try:
        os.stat(path)
    except OSError as e:
        return Err(e.errno or errno.ENOENT)
    return _put(call, call.args[1], _statfs(call.node))


def sys_fstatfs(call):
    """fstatfs(fd): a virtual socket is on sockfs; any other descriptor, the node's
    file system."""
    fd = fd_arg(call.args[0])
    if get_sock(call.proc, fd) is not None:
        return _put(call, call.args[1], _sockfs())
    if fd < 0 or fd >= VFD_BASE:
        return Err(errno.EBADF)
    try:
        procfs.fd_link(call.pid, fd)
    except OSError:
        return Err(errno.EBADF)
    return _put(call, call.args[1], _statfs(call.node))


def _cpu_ns(node) -> int:
    return node.now_ns()


def _cpu_ticks(node) -> int:
    return _cpu_ns(node) * HZ // 10**9


def sys_getrusage(call):
    """The node's clock as its user time; no system time, faults or switches; a
    resident set of RSS_KIB; children none."""
    who = _signed32(call.args[0])
    if who not in (0, -1, 1):                 # RUSAGE_SELF, RUSAGE_CHILDREN, RUSAGE_THREAD
        return Err(errno.EINVAL)
    ns = _cpu_ns(call.node) if who != -1 else 0
    usage = struct.pack("<4q14q", ns // 10**9, ns % 10**9 // 1000, 0, 0,
                        RSS_KIB if who != -1 else 0, *[0] * 13)
    return _put(call, call.args[1], usage)


def sys_times(call):
    """times(buf): the node's clock as its user time, in ticks; returns the ticks of
    its monotonic clock."""
    if call.args[0]:
        ticks = _cpu_ticks(call.node)
        if not call.proc.write(call.args[0], struct.pack("<4q", ticks, 0, 0, 0)):
            return Err(errno.EFAULT)
    return Ret(call.node.monotonic_ns() * HZ // 10**9)


# -- /proc ----------------------------------------------------------------------------

PROC_SELF = re.compile(rb"/proc/(self|thread-self|\d+)(?:/task/\d+)?/(stat|statm|status)")
# /proc/PID/stat's fields from the 3rd (state) on, 1-based as proc(5) numbers them:
# those that change with the host, the moment or where memory lies, and what the node
# sees instead (its ids are set apart: `_ids`)
_STAT_FIXED = {3: b"R", 10: b"0", 11: b"0", 12: b"0", 13: b"0", 15: b"0", 16: b"0",
               17: b"0", 22: b"0", 23: b"%d" % (VM_KIB * 1024), 24: b"%d" % (RSS_KIB // 4),
               **{n: b"0" for n in (26, 27, 28, 29, 30, 35, 36, 37, 39, 42, 43, 44)},
               **{n: b"0" for n in range(45, 52)}}
# /proc/PID/status as the node sees it: these lines, in this order; those not given
# here are the kernel's (what the program made: its name, umask, ids, signal masks),
# the rest the node's own or fixed (the host's capabilities and kernel version show in
# the others, which are left out)
_STATUS = (b"Name", b"Umask", b"State", b"Tgid", b"Ngid", b"Pid", b"PPid", b"TracerPid",
           b"Uid", b"Gid", b"FDSize", b"Groups", b"NStgid", b"NSpid", b"NSpgid", b"NSsid",
           b"VmPeak", b"VmSize", b"VmLck", b"VmPin", b"VmHWM", b"VmRSS", b"RssAnon",
           b"RssFile", b"RssShmem", b"VmData", b"VmStk", b"VmExe", b"VmLib", b"VmPTE",
           b"VmSwap", b"HugetlbPages", b"CoreDumping", b"THP_enabled", b"Threads", b"SigQ",
           b"SigPnd", b"ShdPnd", b"SigBlk", b"SigIgn", b"SigCgt", b"CapInh", b"CapPrm",
           b"CapEff", b"CapBnd", b"CapAmb", b"NoNewPrivs", b"Seccomp", b"Seccomp_filters",
           b"Cpus_allowed", b"Cpus_allowed_list", b"Mems_allowed", b"Mems_allowed_list",
           b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches")
_CAPS = b"000001ffffffffff"
_STATUS_FIXED = {b"State": b"R (running)", b"FDSize": b"64", b"TracerPid": b"0",
                 b"Ngid": b"0", b"VmPeak": b"%d kB" % VM_KIB, b"VmSize": b"%d kB" % VM_KIB,
                 b"VmLck": b"0 kB", b"VmPin": b"0 kB", b"VmHWM": b"%d kB" % RSS_KIB,
                 b"VmRSS": b"%d kB" % RSS_KIB, b"RssAnon": b"%d kB" % RSS_KIB,
                 b"RssFile": b"0 kB", b"RssShmem": b"0 kB", b"VmData": b"%d kB" % RSS_KIB,
                 b"VmStk": b"132 kB", b"VmExe": b"8 kB", b"VmLib": b"2048 kB",
                 b"VmPTE": b"64 kB", b"VmSwap": b"0 kB", b"HugetlbPages": b"0 kB",
                 b"CoreDumping": b"0", b"THP_enabled": b"1", b"SigQ": b"0/63459",
                 b"CapInh": b"0000000000000000", b"CapPrm": _CAPS, b"CapEff": _CAPS,
                 b"CapBnd": _CAPS, b"CapAmb": b"0000000000000000", b"NoNewPrivs": b"1",
                 b"Seccomp": b"2", b"Seccomp_filters": b"1", b"Mems_allowed": b"1",
                 b"Mems_allowed_list": b"0", b"voluntary_ctxt_switches": b"0",
                 b"nonvoluntary_ctxt_switches": b"0"}


def _ids(call, status: dict[bytes, bytes]) -> dict[bytes, int]:
    """The caller's ids as it sees them (its PID namespace's: NSpid's last number): its
    pid, its parent's (0 outside its namespace), its group's and session's; the first
    process of a copy is the original (host.sys_getpid)."""
    def inner(key: bytes) -> int:
        return int((status.get(key) or b"0").split()[-1])
    tasks = call.node.tasks
    pid, host_ppid = inner(b"NSpid"), int(status.get(b"PPid") or 0)
    nested = len((status.get(b"NSpid") or b"").split()) > 1
    ppid = 0 if nested and pid == 1 else procfs.ns_pid(host_ppid) if nested else host_ppid
    if tasks.root_known and call.proc.pid == tasks.pid:
        pid, ppid = tasks.root_known, tasks.parent_known
    return {b"Pid": pid, b"Tgid": pid, b"PPid": ppid, b"pgrp": inner(b"NSpgid"),
            b"session": inner(b"NSsid")}


def _seen_pid(call) -> int:
    """The caller's pid as it sees it (host.sys_getpid, or its PID namespace's)."""
    tasks = call.node.tasks
    if tasks.root_known and call.proc.pid == tasks.pid:
        return tasks.root_known
    return procfs.ns_pid(call.pid)


def proc_self_text(call, path: bytes) -> bytes | None:
    """The text of /proc/self/stat, statm or status (of the caller, or a task of it)
    as the node sees it: the kernel's, its ids the node's and its changing figures
    fixed; None for another path or another process."""
    m = PROC_SELF.fullmatch(path)
    if m is None or m.group(1) not in (b"self", b"thread-self", b"%d" % call.pid,
                                       b"%d" % _seen_pid(call)):
        return None
    which = m.group(2)
    if which == b"statm":
        pages = VM_KIB // 4, RSS_KIB // 4
        return b"%d %d 0 64 0 %d 0\n" % (pages[0], pages[1], pages[1])
    try:
        with open(b"/proc/%d/status" % call.pid, "rb") as f:
            status = f.read()
        with open(b"/proc/%d/stat" % call.pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = dict(line.split(b":\t", 1) for line in status.splitlines() if b":\t" in line)
    ids = _ids(call, fields)
    ticks = b"%d" % _cpu_ticks(call.node)
    if which == b"stat":
        head, _, rest = stat.rstrip(b"\n").rpartition(b") ")
        comm = head.split(b" (", 1)[1]
        values = rest.split(b" ")
        fixed = {**_STAT_FIXED, 4: b"%d" % ids[b"PPid"], 5: b"%d" % ids[b"pgrp"],
                 6: b"%d" % ids[b"session"], 7: b"0", 8: b"-1", 14: ticks}
        for n, value in fixed.items():
            if n - 3 < len(values):
                values[n - 3] = value
        return b"%d (%s) %s\n" % (ids[b"Pid"], comm, b" ".join(values))
    cpus = call.node.setting.spec.cpus
    fixed = {**_STATUS_FIXED, b"Cpus_allowed": b"%x" % ((1 << cpus) - 1),
             b"Cpus_allowed_list": b"0" if cpus == 1 else b"0-%d" % (cpus - 1),
             b"Pid": b"%d" % ids[b"Pid"], b"Tgid": b"%d" % ids[b"Tgid"],
             b"PPid": b"%d" % ids[b"PPid"], b"NStgid": b"%d" % ids[b"Tgid"],
             b"NSpid": b"%d" % ids[b"Pid"], b"NSpgid": b"%d" % ids[b"pgrp"],
             b"NSsid": b"%d" % ids[b"session"], b"TracerPid": b"0", b"Ngid": b"0"}
    return b"".join(b"%s:\t%s\n" % (key, fixed[key] if key in fixed else
                                     fields.get(key, b"").strip()) for key in _STATUS)


def proc_stat(proc) -> bytes:
    """/proc/stat: the model's CPUs, busy for the node's clock between them."""
    node = proc.node
    cpus = node.setting.spec.cpus
    ticks = _cpu_ticks(node)
    rows = [b"cpu  %d 0 0 %d 0 0 0 0 0 0" % (ticks, ticks * (cpus - 1))]
    rows += [b"cpu%d %d 0 0 %d 0 0 0 0 0 0" % (i, ticks if i == 0 else 0,
                                              0 if i == 0 else ticks) for i in range(cpus)]
    boot = (node.realtime_ns() - node.monotonic_ns()) // 10**9
    rows += [b"intr 0", b"ctxt 0", b"btime %d" % boot, b"processes 1",
             b"procs_running 1", b"procs_blocked 0", b"softirq 0 0 0 0 0 0 0 0 0 0 0"]
    return b"\n".join(rows) + b"\n"


def proc_loadavg(proc) -> bytes:
    return b"0.00 0.00 0.00 1/1 1\n"


def proc_uptime(proc) -> bytes:
    ns = proc.node.monotonic_ns()
    idle = ns * (proc.node.setting.spec.cpus - 1)
    return b"%d.%02d %d.%02d\n" % (ns // 10**9, ns % 10**9 // 10**7,
                                  idle // 10**9, idle % 10**9 // 10**7)


FIGURE_FILES = {b"/proc/stat": proc_stat, b"/proc/loadavg": proc_loadavg,
                b"/proc/uptime": proc_uptime}
