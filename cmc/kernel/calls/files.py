"""The calls of the disk model (docs/target-contract.md, "The disk"; world/disk.py): the writes, truncations and
syncs of the files in a node's working directory. Writes and truncations run
natively and are recorded first; a sync is answered here (the file's contents are
read into its durable image, no real fsync). A call on anything else (a pipe, a
file elsewhere, a descriptor of a virtual socket where the call fails) is left as
it was. With `disk off` the filter sends none of these calls here but the writes to
fds 3 and 193 and to virtual sockets, and the syncs of virtual sockets."""
from __future__ import annotations

import errno
import os
import re
import stat

from ..linux import procfs
from ..linux.abi import AT_FDCWD, VFD_BASE
from .answer import CONTINUE, Err, Ret
from ..world.disk import Write, file_id, in_another_world, reached_another_world
from .handler import fd_arg, signed64, unsupported
from . import shm
from .sockets import get_sock
from ..linux.syscalls import NAME, NR, ROW

O_APPEND = 0o2000
O_DSYNC = 0o10000               # O_SYNC is O_DSYNC | __O_SYNC
O_TRUNC = 0o1000
O_CREAT = 0o100
RWF_DSYNC, RWF_SYNC, RWF_APPEND = 0x2, 0x4, 0x10
SYNC_FILE_RANGE_WAIT_AFTER = 4
FALLOC_FL_KEEP_SIZE = 1


def _inside(proc, path: str) -> bool:
    return path.startswith(proc.node.cwd + "/")


def node_file(call, fd: int):
    """(path, name in the node's directory, identity, size) of the regular file
    open on fd when it is one of the node's directory's (and not unlinked), else
    None."""
    proc = call.proc
    link = procfs.fd_link(call.pid, fd)
    try:
        st = os.stat(link)
        target = os.readlink(link)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink == 0:
            return None
        if not _inside(proc, target):
            if in_another_world(proc.node, target):
                raise reached_another_world()
            return None
        ident = file_id(target)
    except OSError:
        return None
    if ident[1] != st.st_ino:
        return None
    return target, target[len(proc.node.cwd) + 1:], ident, st.st_size


def _fdinfo(call, fd: int) -> tuple[int, int]:
    """(position, flags) of descriptor fd of the calling thread."""
    info = procfs.fdinfo(call.pid, fd)
    return int(info.get("pos", 0)), int(info.get("flags", "0"), 8)


def disk_write(call, fd: int, read):
    """A write on fd (not 3, 193 or a virtual socket's) of what read() returns (None
    when it cannot be read), about to run natively: recorded when fd is a file of
    the node's directory."""
    proc = call.proc
    if not proc.node.disk.on:
        return CONTINUE
    found = node_file(call, fd)
    if found is None:
        return CONTINUE
    data = read()
    if not data:
        return CONTINUE             # nothing written, or the kernel says EFAULT
    _, name, ident, size = found
    try:
        pos, flags = _fdinfo(call, fd)
    except (OSError, ValueError):
        return CONTINUE
    nr, args = call.nr, call.args
    sync = bool(flags & O_DSYNC)
    offset = pos
    if nr == NR["pwritev2"]:
        sync = sync or bool(args[5] & (RWF_DSYNC | RWF_SYNC))
        if args[5] & RWF_APPEND:
            flags |= O_APPEND
        elif args[3] != (1 << 64) - 1:         # -1: at the descriptor's position
            offset = args[3]
    elif NAME[nr].startswith("pwrite"):         # pwrite64, pwritev: at their offset
        offset = args[3]
    if flags & O_APPEND:
        offset = size
    proc.node.disk.wrote(Write(ident, name, "write", offset, len(data), data, size), sync)
    return CONTINUE


def _truncated(proc, ident, name: str, length: int, size: int) -> None:
    proc.node.disk.wrote(Write(ident, name, "truncate", length, 0, None, size), False)


def disk_open(call, dirfd: int, path: bytes, flags: int) -> None:
    """An open with O_CREAT may make a name; one with O_TRUNC (filter.PASS_FLAGS) of
    an existing file of the node's directory truncates it: recorded before it runs."""
    proc = call.proc
    if not proc.node.disk.on or not flags & (O_TRUNC | O_CREAT):
        return
    proc.node.disk.changed()
    if not flags & O_TRUNC:
        return
    full = _resolve(call, dirfd, path)
    if full is None:
        return
    try:
        st = os.stat(full)
        if stat.S_ISREG(st.st_mode) and st.st_size:
            real = os.path.realpath(full)
            if _inside(proc, real):
                _truncated(proc, file_id(real), real[len(proc.node.cwd) + 1:], 0, st.st_size)
    except OSError:
        pass


def _resolve(call, dirfd: int, path: bytes | None) -> str | None:
    if path is None:
        return None
    path = os.fsdecode(path)
    if not path.startswith("/"):
        try:
            path = os.path.join(os.fsdecode(procfs.directory(
                call.pid, None if dirfd == AT_FDCWD else dirfd)), path)
        except OSError:
            return None
    return path


def _not_a_socket(call, fd: int):
    """Syncs and truncations of a virtual socket fail as on Linux (else None)."""
    if get_sock(call.proc, fd) is not None:
        return Err(errno.EINVAL)
    if fd >= VFD_BASE:
        return Err(errno.EBADF)
    return None


def _file_of_call(call, on_socket: int) -> tuple:
    """(node_file of the call's first argument, None), or (None, the call's answer):
    on a virtual socket the error `on_socket` (EBADF for a number with nothing
    behind it), and for anything that is not a file of the node's directory,
    CONTINUE."""
    fd = fd_arg(call.args[0])
    failed = _not_a_socket(call, fd)
    if failed is not None:
        return None, Err(on_socket) if failed.errno == errno.EINVAL else failed
    found = node_file(call, fd) if call.node.disk.on else None
    return (None, CONTINUE) if found is None else (found, None)


def sys_fsync(call):
    proc, fd = call.proc, fd_arg(call.args[0])
    failed = _not_a_socket(call, fd)
    if failed is not None:
        return failed
    if not proc.node.disk.on:
        return CONTINUE
    link = procfs.fd_link(call.pid, fd)
    try:
        st = os.stat(link)
        target = os.readlink(link)
    except OSError:
        return CONTINUE
    if stat.S_ISDIR(st.st_mode) and (target == proc.node.cwd or _inside(proc, target)):
        proc.node.disk.dir_synced(file_id(target), target)
        return Ret(0)
    found = node_file(call, fd)
    if found is None:
        return CONTINUE
    proc.node.disk.synced(found[2], found[0])
    return Ret(0)


def sys_sync_file_range(call):
    proc, args = call.proc, call.args
    found, answer = _file_of_call(call, errno.ESPIPE)
    if answer is not None:
        return answer
    offset, nbytes, flags = args[1], args[2], args[3]
    if offset >> 63 or nbytes >> 63 or flags & ~7:
        return Err(errno.EINVAL)
    if flags & SYNC_FILE_RANGE_WAIT_AFTER:
        proc.node.disk.synced_range(found[2], found[1], offset, offset + nbytes if nbytes else None)
    return Ret(0)


def sys_sync(call):
    proc = call.proc
    if call.nr == NR["syncfs"]:
        failed = _not_a_socket(call, fd_arg(call.args[0]))
        if failed is not None:
            return Ret(0) if failed.errno == errno.EINVAL else failed
    if not proc.node.disk.on:
        return CONTINUE
    proc.node.disk.synced_all(proc.node.cwd)
    return Ret(0)


def sys_ftruncate(call):
    proc, fd = call.proc, fd_arg(call.args[0])
    failed = _not_a_socket(call, fd)
    if failed is not None:
        return failed
    found = node_file(call, fd) if proc.node.disk.on else None
    if found is not None and not call.args[1] >> 63 and call.args[1] != found[3]:
        _truncated(proc, found[2], found[1], call.args[1], found[3])
    return CONTINUE


def sys_truncate(call):
    proc = call.proc
    full = _resolve(call, AT_FDCWD, proc.read_cstr(call.args[0]))
    if full is None or not proc.node.disk.on or call.args[1] >> 63:
        return CONTINUE
    try:
        real = os.path.realpath(full)
        st = os.stat(real)
        if _inside(proc, real) and stat.S_ISREG(st.st_mode) and st.st_size != call.args[1]:
            _truncated(proc, file_id(real), real[len(proc.node.cwd) + 1:], call.args[1],
                       st.st_size)
    except OSError:
        pass
    return CONTINUE


def sys_creat(call):
    disk_open(call, AT_FDCWD, call.proc.read_cstr(call.args[0]), O_CREAT | O_TRUNC)
    return CONTINUE


def sys_name(call):
    """A name may be made or removed: the tree's digest is computed again; a
    shared-memory object's name is the world's (shm.py); under strict a file losing
    its last name keeps its durable contents (Disk.removing)."""
    proc = call.proc
    if _jvm_perf_dir(call):
        return Err(errno.EACCES)
    paths = _name_paths(call) if ROW[call.nr].paths else []
    answer = shm.name_call(call, NAME[call.nr], paths) if paths else None
    if answer is not None:
        return answer
    proc.node.disk.changed()
    gone = _removed(call, paths) if proc.node.disk.strict else None
    if gone is not None:
        proc.node.disk.removing(os.fsdecode(gone))
    return CONTINUE


AT_REMOVEDIR, RENAME_EXCHANGE = 0x200, 2
_PERF_DIR = re.compile(r"/tmp/hsperfdata_[^/]+/?")


def _jvm_perf_dir(call) -> bool:
    """A mkdir of the JVM's perf-data directory (/tmp/hsperfdata_USER, whose files
    every JVM of the machine maps and a killed one leaves behind): refused, EACCES,
    after which HotSpot keeps its perf data in its own memory, silently, which a copy
    of the world copies (docs/target-contract.md, "The JVM")."""
    name = NAME[call.nr]
    if not name.startswith("mkdir"):
        return False
    dirfd, at = (AT_FDCWD, 0) if name == "mkdir" else (fd_arg(call.args[0]), 1)
    path = _resolve(call, dirfd, call.proc.read_cstr(call.args[at]))
    return path is not None and _PERF_DIR.fullmatch(os.path.normpath(path)) is not None


def _name_paths(call) -> list[bytes | None]:
    """The paths an unlink, link or rename names, absolute and normalised (where each
    is: its row's `paths`, a dirfd argument or None for the cwd, and a path argument)."""
    args, read = call.args, call.proc.read_cstr
    out = []
    for dirfd, path in ROW[call.nr].paths:
        full = _resolve(call, AT_FDCWD if dirfd is None else fd_arg(args[dirfd]),
                        read(args[path]))
        out.append(None if full is None else os.fsencode(os.path.normpath(full)))
    return out


def _removed(call, paths: list) -> bytes | None:
    """The name the call removes or replaces (of `paths`), else None."""
    nr, args, name = call.nr, call.args, NAME[call.nr]
    if name.startswith("unlink") and not (nr == NR["unlinkat"] and args[2] & AT_REMOVEDIR):
        return paths[0]
    if name.startswith("rename") and not (nr == NR["renameat2"] and args[4] & RENAME_EXCHANGE):
        return paths[1]
    return None


def sys_fallocate(call):
    """Of a file of the node's directory: answered by cmc, which grows the file (mode
    0 past its end) without allocating blocks, so that a world holds no preallocated
    zeros (docs/target-contract.md, "The disk"); the size, the bytes and the errors
    are Linux's (vfs_fallocate's checks, in its order), only st_blocks and SEEK_HOLE
    tell. A model disk never runs out of space, so there is nothing to reserve."""
    proc, args = call.proc, call.args
    found, answer = _file_of_call(call, errno.ENODEV)
    if answer is not None:
        return answer
    mode, offset, length = args[1] & 0xFFFFFFFF, signed64(args[2]), signed64(args[3])
    if offset < 0 or length <= 0:
        return Err(errno.EINVAL)
    if mode & ~FALLOC_FL_KEEP_SIZE:
        return unsupported(call, call.nr, args, f"changes {found[1]} in a way the disk "
                           "model does not follow (only fallocate modes 0 and "
                           "FALLOC_FL_KEEP_SIZE are; try disk off)")
    if _fdinfo(call, fd_arg(args[0]))[1] & os.O_ACCMODE == os.O_RDONLY:
        return Err(errno.EBADF)
    end = offset + length
    if end >= 1 << 63:
        return Err(errno.EFBIG)
    if not mode & FALLOC_FL_KEEP_SIZE and end > found[3]:
        proc.node.disk.wrote(Write(found[2], found[1], "extend", offset, length, None, found[3]),
                             False)
        os.truncate(found[0], end)
    return Ret(0)


def sys_mmap(call):
    """Only shared writable mappings of a descriptor come here (filter.py). Of a file
    of the node's: what is stored through it is an unsynced write until fsync,
    fdatasync or msync(MS_SYNC) (disk.py, Disk.mapped_shared); the mapping is native."""
    found = node_file(call, fd_arg(call.args[4]))
    if found is not None:
        call.node.disk.mapped_shared(found[2], found[0])
    return CONTINUE


MS_SYNC = 4


def sys_msync(call):
    """msync(MS_SYNC) of a shared mapping of a node's file: the range it covers is
    durable (disk.py, synced_range); MS_ASYNC makes nothing durable. Runs natively too."""
    proc, (addr, length, flags) = call.proc, call.args[:3]
    if not flags & MS_SYNC or not proc.node.disk.on:
        return CONTINUE
    found = procfs.mapping_at(call.pid, addr)
    if found is None:
        return CONTINUE
    start, end, offset, path = found
    cwd = proc.node.cwd
    if not path.startswith(cwd + "/"):
        return CONTINUE
    try:
        ident = file_id(path)
    except OSError:
        return CONTINUE
    first = offset + (addr - start)
    last = offset + (min(addr + length, end) - start)
    proc.node.disk.synced_range(ident, path[len(cwd) + 1:], first, last)
    return CONTINUE


def sys_copy_into(call):
    """With a page cache these come here always. On a virtual socket: unsupported,
    as before. Into a file of the node's directory, copy_file_range and sendfile
    from a regular file are writes of what they will copy (cat and cp copy so);
    splice (from a pipe: its bytes cannot be read first) is refused. Else they run
    natively."""
    proc, args = call.proc, call.args
    sendfile = call.nr == NR["sendfile"]
    out_fd = fd_arg(args[0] if sendfile else args[2])
    in_fd = fd_arg(args[1] if sendfile else args[0])
    if out_fd >= VFD_BASE or in_fd >= VFD_BASE:
        return unsupported(call, call.nr, args)
    found = node_file(call, out_fd)
    if found is None:
        return CONTINUE
    if call.nr == NR["splice"]:
        return unsupported(call, call.nr, args,
                           f"writes into {found[1]} from a pipe, which disk "
                           f"{call.node.disk.mode} does not follow (try disk off)")
    in_off_addr, out_off_addr, length = ((args[2], 0, args[3]) if sendfile
                                         else (args[1], args[3], args[4]))
    try:
        in_pos, _ = _fdinfo(call, in_fd)
        out_pos, out_flags = _fdinfo(call, out_fd)
        if in_off_addr:
            raw = proc.read(in_off_addr, 8)
            if raw is None or len(raw) != 8:
                return CONTINUE                 # the kernel says EFAULT
            in_pos = int.from_bytes(raw, "little", signed=True)
        if out_off_addr:
            raw = proc.read(out_off_addr, 8)
            if raw is None or len(raw) != 8:
                return CONTINUE
            out_pos = int.from_bytes(raw, "little", signed=True)
        if in_pos < 0 or out_pos < 0:
            return CONTINUE                     # EINVAL
        src = os.open(procfs.fd_link(call.pid, in_fd), os.O_RDONLY)
        try:
            if not stat.S_ISREG(os.fstat(src).st_mode):
                return unsupported(call, call.nr, args,
                                   f"writes into {found[1]} from something not a file, "
                                   f"which disk {call.node.disk.mode} does not follow "
                                   "(try disk off)")
            data = os.pread(src, min(length, 1 << 30), in_pos)
        finally:
            os.close(src)
    except OSError:
        return CONTINUE
    if out_flags & O_APPEND:
        out_pos = found[3]
    if data:
        proc.node.disk.wrote(Write(found[2], found[1], "write", out_pos, len(data), data, found[3]),
                        bool(out_flags & O_DSYNC))
    return CONTINUE
