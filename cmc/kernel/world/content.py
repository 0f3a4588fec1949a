"""A file's contents as cmc keeps and compares them: in chunks, zeros left out.

What a world costs must grow with what its nodes wrote, not with the size of their
files (docs/design.md, "What a world costs"): a 64 MB file that a program
preallocated and wrote 4 KiB into is 4 KiB of data. So nothing here reads a file
whole or keeps it whole:

- `sparse(data, offset)` keeps bytes as runs with their all-zero CHUNK-aligned
  chunks left out (the disk model's saved bytes are such runs); `sparse_range` the
  same of a range of a file, its holes not read;
- `Content` is a file's bytes seen through a window: the chunks of a source (a real
  file, read a chunk at a time and skipping its holes, or saved runs) and the
  chunks changed in memory since; it can be written back into a file (only the
  changed chunks, or all of them into a new one, leaving zeros as holes);
- its `digest` is a function of the bytes alone (size, and each non-zero chunk's
  hash by its index), whether a zero range is a hole or written zeros;
- `copy_tree` copies a node's directory the same way: a preallocated or
  zero-filled range is a hole in the copy, not bytes.
"""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat

import xxhash

CHUNK = 1 << 16
ZERO = bytes(CHUNK)
SEEK_DATA, SEEK_HOLE = 3, 4
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def is_zero(data) -> bool:
    n = len(data)
    return data == ZERO[:n] if n <= CHUNK else not any(
        data[i:i + CHUNK] != ZERO[:min(CHUNK, n - i)] for i in range(0, n, CHUNK))


def sparse(data: bytes, offset: int) -> tuple[tuple[int, bytes], ...]:
    """data, found at offset of a file, as (offset, bytes) runs without the pieces
    that are all zero (pieces end where CHUNK-aligned chunks do)."""
    pieces = []
    pos, end = offset, offset + len(data)
    while pos < end:
        stop = min(end, (pos // CHUNK + 1) * CHUNK)
        pieces.append((pos, data[pos - offset:stop - offset]))
        pos = stop
    return _merged(pieces)


def sparse_range(fd: int, start: int, end: int) -> tuple[tuple[int, bytes], ...]:
    """The bytes of fd in [start, end) as `sparse` gives them, read a chunk at a time
    and only where the file system says there may be data: a 64 MB preallocated file
    cut back to its first record costs no read of its 64 MB of holes."""
    pieces = []
    for lo, hi in _data_ranges(fd, end):
        lo, hi = max(lo, start), min(hi, end)
        pos = lo
        while pos < hi:
            stop = min(hi, (pos // CHUNK + 1) * CHUNK)
            pieces.append((pos, os.pread(fd, stop - pos, pos)))
            pos = stop
    return _merged(pieces)


def _merged(pieces) -> tuple[tuple[int, bytes], ...]:
    """(offset, bytes) pieces in order, the all-zero ones left out, the adjacent
    ones joined."""
    runs: list[list] = []
    for pos, piece in pieces:
        if is_zero(piece):
            continue
        if runs and runs[-1][0] + len(runs[-1][1]) == pos:
            runs[-1][1] += piece
        else:
            runs.append([pos, bytearray(piece)])
    return tuple((off, bytes(b)) for off, b in runs)


def _data_ranges(fd: int, size: int):
    """The (start, end) ranges of fd that may hold data (holes skipped where the
    file system says where they are)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return              # nothing but a hole up to the end
            yield pos, size         # no SEEK_DATA here: all of it
            return
        end = min(size, os.lseek(fd, start, SEEK_HOLE))
        yield start, end
        pos = end


class Content:
    """A file's bytes: those of a source (an open file, or saved runs) below `cut`,
    zeros above it, with the chunks in `changed` (index -> bytearray, or None: all
    zero) taking their place. Logically every byte at or past `size` is zero."""

    def __init__(self, fd: int | None = None, runs=(), size: int | None = None):
        self._fd = fd
        self._runs = tuple(runs)
        if fd is not None:
            self.size = os.fstat(fd).st_size
        else:
            self.size = size if size is not None else max(
                (off + len(b) for off, b in self._runs), default=0)
        self.cut = self.size
        self.changed: dict[int, bytearray | None] = {}

    @classmethod
    def of_path(cls, path: str) -> "Content":
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        c = cls(fd)
        c.owns_fd = True
        return c

    owns_fd = False

    def close(self) -> None:
        if self.owns_fd and self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the source -------------------------------------------------------------------
    def _source(self, i: int) -> bytes:
        """Chunk i of the source, zeros past `cut` (shorter than CHUNK at the end)."""
        lo = i * CHUNK
        hi = min(lo + CHUNK, self.cut)
        if hi <= lo:
            return b""
        if self._fd is not None:
            return os.pread(self._fd, hi - lo, lo)
        out = bytearray(hi - lo)
        for off, b in self._runs:
            a, z = max(off, lo), min(off + len(b), hi)
            if a < z:
                out[a - lo:z - lo] = b[a - off:z - off]
        return bytes(out)

    def _source_chunks(self) -> list[int]:
        """The indices of the source's chunks that may hold data, below cut."""
        found: set[int] = set()
        if self._fd is not None:
            for start, end in _data_ranges(self._fd, self.cut):
                found.update(range(start // CHUNK, (end - 1) // CHUNK + 1))
        else:
            for off, b in self._runs:
                end = min(off + len(b), self.cut)
                if off < end:
                    found.update(range(off // CHUNK, (end - 1) // CHUNK + 1))
        return sorted(found)

    def chunk(self, i: int) -> bytes:
        """Chunk i as CHUNK bytes (zero-padded)."""
        if i in self.changed:
            c = self.changed[i]
            return ZERO if c is None else bytes(c)
        data = self._source(i)
        return data + ZERO[len(data):] if len(data) < CHUNK else data

    def _mine(self, i: int) -> bytearray:
        c = self.changed.get(i, False)
        if c is False:
            c = bytearray(self.chunk(i))
        elif c is None:
            c = bytearray(CHUNK)
        self.changed[i] = c
        return c

    # -- changes ------------------------------------------------------------------------
    def write(self, offset: int, data: bytes) -> None:
        pos, end = offset, offset + len(data)
        while pos < end:
            i = pos // CHUNK
            stop = min(end, (i + 1) * CHUNK)
            self._mine(i)[pos - i * CHUNK:stop - i * CHUNK] = data[pos - offset:stop - offset]
            pos = stop
        self.size = max(self.size, end)

    def zero(self, start: int, end: int) -> None:
        """Bytes [start, end) become zero (the size does not change)."""
        end = min(end, self.size)
        pos = start
        while pos < end:
            i = pos // CHUNK
            stop = min(end, (i + 1) * CHUNK)
            if pos == i * CHUNK and stop == (i + 1) * CHUNK:
                self.changed[i] = None
            else:
                self._mine(i)[pos - i * CHUNK:stop - i * CHUNK] = bytes(stop - pos)
            pos = stop

    def truncate(self, length: int) -> None:
        if length < self.size:
            self.zero(length, self.size)
            self.cut = min(self.cut, length)
            for i in [i for i in self.changed if i * CHUNK >= length]:
                del self.changed[i]
        self.size = length

    def extend(self, length: int) -> None:
        self.size = max(self.size, length)

    # -- reading it ---------------------------------------------------------------------
    def indices(self) -> list[int]:
        """The chunks that may hold data, in order."""
        last = (self.size + CHUNK - 1) // CHUNK
        return sorted(i for i in set(self._source_chunks()) | set(self.changed) if i < last)

    def digest(self) -> bytes:
        """A 128-bit hash of the bytes alone."""
        h = xxhash.xxh3_128()
        h.update(self.size.to_bytes(8, "little"))
        for i in self.indices():
            data = self.chunk(i)
            if data != ZERO:
                h.update(i.to_bytes(8, "little") + xxhash.xxh3_64_digest(data))
        return h.digest()

    def runs(self) -> tuple[tuple[int, bytes], ...]:
        """All of it as sparse runs (what the disk model saves)."""
        return _merged((i * CHUNK, self.chunk(i)[:max(0, min(CHUNK, self.size - i * CHUNK))])
                       for i in self.indices())

    # -- writing it ---------------------------------------------------------------------
    def write_to(self, fd: int, whole: bool = False) -> None:
        """Make the file open on fd hold these bytes: it held the source (only the
        changed chunks are written), or with `whole` anything (all are written).
        Zeros are left as holes where the file had none there."""
        if whole:
            os.ftruncate(fd, 0)
            todo = self.indices()
        else:
            if os.fstat(fd).st_size > self.cut:
                os.ftruncate(fd, self.cut)
            todo = sorted(i for i in self.changed if i * CHUNK < self.size)
        for i in todo:
            lo = i * CHUNK
            n = min(CHUNK, self.size - lo)
            data = self.chunk(i)[:n]
            if is_zero(data):
                if not whole and lo < self.cut:
                    _punch(fd, lo, n)
                continue
            os.pwrite(fd, data, lo)
        os.ftruncate(fd, self.size)


def _punch(fd: int, offset: int, length: int) -> None:
    """Zero [offset, offset + length) of fd as a hole (else by writing zeros)."""
    libc = _libc()
    if libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      ctypes.c_long(offset), ctypes.c_long(length)) != 0:
        os.pwrite(fd, bytes(length), offset)


_LIBC: list = []


def _libc():
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


# -- copies of a node's directory -----------------------------------------------------------
def copy_file(src: str, dst: str) -> None:
    """src to a new file dst, zeros as holes, with its mode and times."""
    with Content.of_path(src) as c:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            c.write_to(fd, whole=True)
        finally:
            os.close(fd)
    shutil.copystat(src, dst, follow_symlinks=False)


def copy_tree(src: str, dst: str) -> None:
    """shutil.copytree(src, dst, symlinks=True), but sparse (copy_file)."""
    shutil.copytree(src, dst, symlinks=True, copy_function=copy_file)


# files compact() has seen as they are: path -> (inode, blocks, mtime)
_COMPACTED: dict[str, tuple] = {}
COMPACT_FROM = 1 << 20           # files taking less than this are left as they are


def compact(root: str) -> None:
    """Leave the zeros of the large files under root as holes: what a program
    preallocated (fallocate) or filled with zeros takes no memory in a world held
    on a memory file system. The bytes read the same; the modification time is
    kept; a file already compacted and not changed since is not read again."""
    if len(_COMPACTED) > 1 << 16:
        _COMPACTED.clear()
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            seen = (st.st_ino, st.st_blocks, st.st_mtime_ns)
            if (not stat.S_ISREG(st.st_mode) or st.st_blocks * 512 < COMPACT_FROM
                    or _COMPACTED.get(path) == seen):
                continue
            try:
                _compact_file(path, st)
                st = os.lstat(path)
            except OSError:
                continue
            _COMPACTED[path] = (st.st_ino, st.st_blocks, st.st_mtime_ns)


def _compact_file(path: str, st) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        pos = 0
        for start, end in list(_data_ranges(fd, st.st_size)) + [(st.st_size, st.st_size)]:
            if start > pos:
                _punch(fd, pos, start - pos)        # allocated, but a hole to SEEK_DATA
            for lo in range(start - start % CHUNK, end, CHUNK):
                a, z = max(lo, start), min(lo + CHUNK, end)
                if is_zero(os.pread(fd, z - a, a)):
                    _punch(fd, a, z - a)
            pos = end
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def directory_shape(cwd: str) -> bytes:
    """What a node's directory shows to a program that opens none of its files: names,
    kinds, modes, sizes and link targets, not data or times (proc/zygote.py: a start's
    key; a start ends before it opens a file there, but `stat`, `access`, `readlink`
    and `mkdir` run natively, unseen)."""
    h = xxhash.xxh3_128()
    for folder, dirs, files in os.walk(cwd):
        dirs.sort()
        for name in [""] + sorted(files) + dirs:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            h.update(f"{os.path.relpath(path, cwd)}\0{st.st_mode:o}\0{st.st_size}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.fsencode(os.readlink(path)))
    return h.digest()
