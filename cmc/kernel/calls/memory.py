"""Advice about fork (docs/target-contract.md, "Memory a fork would not copy"). cmc
copies a process by a fork (proc/fork.py), so memory the program asked a fork not to
copy would be missing in the copy (Node's V8 marks its heap MADV_DONTFORK: every copy
of a Node process faulted at its first JavaScript), and memory asked to be wiped
would be zeros in it.

- MADV_DONTFORK is answered without being applied: a copy, and a child the program
  forks, has that memory too (a child that was to go without it only costs pages
  shared copy-on-write). The answer is the kernel's: EINVAL for an address not
  page-aligned, ENOMEM for a range with an unmapped page in it, else 0.
- MADV_WIPEONFORK runs natively, and its process is not copied from then on (a fork
  would hand the copy zeros where the original has its data): its worlds are replayed,
  saying why."""
from __future__ import annotations

import errno

from ..linux import procfs
from ..linux.abi import MADV_WIPEONFORK
from .answer import CONTINUE, Err, Ret

PAGE = 4096


def sys_madvise(call):
    addr, length, advice = call.args[:3]
    if advice == MADV_WIPEONFORK:
        call.proc.wipes = True
        return CONTINUE
    if addr % PAGE:
        return Err(errno.EINVAL)
    end = addr + (length + PAGE - 1) // PAGE * PAGE
    if end < addr:
        return Err(errno.EINVAL)
    if end == addr:
        return Ret(0)
    if not _mapped(call.proc.pid, addr, end):
        return Err(errno.ENOMEM)
    return Ret(0)


def _mapped(pid: int, lo: int, hi: int) -> bool:
    """Whether every page of [lo, hi) of process pid is mapped."""
    at = lo
    for start, end in procfs.ranges(pid):
        if end <= at:
            continue
        if start > at:
            return False
        at = end
        if at >= hi:
            return True
    return at >= hi
