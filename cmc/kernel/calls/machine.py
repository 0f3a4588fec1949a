"""The machine a node sees is the model's, not the host's (docs/target-contract.md,
"The machine"): its CPUs (sched_getaffinity, getcpu, /sys/devices/system/cpu/online,
/proc/cpuinfo), its memory (sysinfo, /proc/meminfo), its host name (uname,
/proc/sys/kernel/hostname, /etc/hostname: the node's name) and the files that resolve
names (/etc/hosts, /etc/resolv.conf, /etc/nsswitch.conf: world/names.py). A runtime that sizes itself by them --
Go's scheduler takes its GOMAXPROCS from the affinity mask -- then does the same on
a laptop with 16 cores, on a 2-core CI machine, and in a search worker pinned to one
CPU, so the counts are the same everywhere."""
from __future__ import annotations

import errno
import os
import struct

from .answer import Err, Ret
from ..world import names

PAGE = 4096
UTS_LEN = 65
RELEASE = os.uname().release.encode()     # what a program may test features by


def _cpus(proc) -> int:
    return proc.node.setting.spec.cpus


def _mask_size(cpus: int) -> int:
    return (cpus + 63) // 64 * 8          # the kernel's cpumask_size(), in longs


def sys_sched_getaffinity(call):
    """Every thread may run on the model's CPUs 0..N-1."""
    cpus = _cpus(call.proc)
    length, addr = call.args[1], call.args[2]
    size = _mask_size(cpus)
    if length * 8 < cpus or length % 8:
        return Err(errno.EINVAL)
    mask = ((1 << cpus) - 1).to_bytes(size, "little")
    if not call.proc.write(addr, mask):
        return Err(errno.EFAULT)
    return Ret(size)


def sys_sched_setaffinity(call):
    """Taken and forgotten: the host's CPUs are not the node's to choose (a mask with
    none of the model's CPUs is refused, as the kernel refuses one with none online)."""
    cpus = _cpus(call.proc)
    length, addr = call.args[1], call.args[2]
    data = call.proc.read(addr, min(length, 128))
    if data is None:
        return Err(errno.EFAULT)
    if not int.from_bytes(data, "little") & ((1 << cpus) - 1):
        return Err(errno.EINVAL)
    return Ret(0)


def sys_getcpu(call):
    """Every thread is on CPU 0 of NUMA node 0."""
    for addr in call.args[:2]:
        if addr and not call.proc.write(addr, struct.pack("<I", 0)):
            return Err(errno.EFAULT)
    return Ret(0)


def sys_sysinfo(call):
    """The model's memory, no swap, a load of 0, up since the node's clock started."""
    node = call.node
    memory = node.setting.spec.memory
    uptime = node.monotonic_ns() // 10**9
    info = struct.pack("<q3Q6QHHxxxxQQI", uptime, 0, 0, 0, memory, memory // 2, 0, 0, 0, 0,
                       1, 0, 0, 0, 1)
    info += bytes(112 - len(info))
    if not call.proc.write(call.args[0], info):
        return Err(errno.EFAULT)
    return Ret(0)


def _uts(value: bytes) -> bytes:
    return value[:UTS_LEN - 1].ljust(UTS_LEN, b"\0")


def sys_uname(call):
    """Linux on x86_64 named after the node; the release is the host's (a program may
    test for a kernel feature by it), the version a fixed one."""
    name = call.node.name.encode()
    uts = b"".join(_uts(v) for v in (b"Linux", name, RELEASE, b"#1 SMP cmc", b"x86_64",
                                     b"(none)"))
    if not call.proc.write(call.args[0], uts):
        return Err(errno.EFAULT)
    return Ret(0)


def _cpu_list(cpus: int) -> bytes:
    return (b"0\n" if cpus == 1 else f"0-{cpus - 1}\n".encode())


def _cpuinfo(cpus: int) -> bytes:
    block = ("processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
             "model name\t: cmc virtual CPU\nstepping\t: 7\ncpu MHz\t\t: 1000.000\n"
             "physical id\t: 0\nsiblings\t: {c}\ncore id\t\t: {n}\ncpu cores\t: {c}\n"
             "apicid\t\t: {n}\nflags\t\t: fpu tsc cx8 cmov mmx fxsr sse sse2 ht syscall nx lm "
             "constant_tsc nonstop_tsc pni ssse3 cx16 sse4_1 sse4_2 popcnt\n"
             "bogomips\t: 2000.00\nclflush size\t: 64\ncache_alignment\t: 64\n"
             "address sizes\t: 46 bits physical, 48 bits virtual\n\n")
    return "".join(block.format(n=n, c=cpus) for n in range(cpus)).encode()


def _meminfo(memory: int) -> bytes:
    kib = memory // 1024
    rows = [("MemTotal", kib), ("MemFree", kib // 2), ("MemAvailable", kib // 2),
            ("Buffers", 0), ("Cached", 0), ("SwapCached", 0), ("SwapTotal", 0),
            ("SwapFree", 0), ("Shmem", 0)]
    return "".join(f"{k + ':':<16}{v:>8} kB\n" for k, v in rows).encode()


# The files of the machine a node reads, made up from the model (opens.py answers an
# open of one with its text); each path contains one of filter.PASS_NEEDLES.
MACHINE_FILES = {
    b"/sys/devices/system/cpu/online": lambda proc: _cpu_list(_cpus(proc)),
    b"/sys/devices/system/cpu/possible": lambda proc: _cpu_list(_cpus(proc)),
    b"/sys/devices/system/cpu/present": lambda proc: _cpu_list(_cpus(proc)),
    b"/proc/cpuinfo": lambda proc: _cpuinfo(_cpus(proc)),
    b"/proc/meminfo": lambda proc: _meminfo(proc.node.setting.spec.memory),
    b"/proc/sys/kernel/hostname": lambda proc: proc.node.name.encode() + b"\n",
    # names (world/names.py): the same on every machine
    b"/etc/hostname": lambda proc: proc.node.name.encode() + b"\n",
    b"/etc/hosts": lambda proc: names.hosts([n.name for n in proc.node.setting.nodes]),
    b"/etc/resolv.conf": lambda proc: names.RESOLV_CONF,
    b"/etc/nsswitch.conf": lambda proc: names.NSSWITCH,
}
