"""The disk (docs/target-contract.md, "The disk"): a page cache over the files of a node's working directory.

Writes run natively, so a program sees its files as it wrote them and a write costs
one notification. What a CRASH keeps is cmc's record, kept beside the real files, and
it grows with what was written since the last fsync, never with a file's size (an
undo log; docs/design.md, "What a world costs"):

- `pending`: the unsynced writes, in the order the node issued them (a write, a
  truncate, an extension), each with the file's size before it and the bytes it
  overwrote (sparse runs: all-zero chunks left out), and the bytes it wrote under
  `fsync partial`. A file's durable contents are its current contents with its
  pending writes taken back, last first. Files are named by identity (device, inode,
  birth time: the same across renames, never the same for two files).
- `saved`: a durable image (sparse runs and a size) only where the contents cannot be
  had that way: a synced write over unsynced ones, a synced range, and under strict a
  file losing its last name while a durable listing names it.
- `dirs` (strict only): the durable listing of each directory that was fsynced (and
  of the node's directory as it started: empty), name -> (kind, identity or target).

fsync/fdatasync of a file (and sync_file_range with WAIT_AFTER over all of it) drop its
pending writes; a write through a descriptor opened with O_SYNC/O_DSYNC (or pwritev2
with RWF_SYNC/RWF_DSYNC) is durable as it is made; sync/syncfs make every file (and
under strict every listing) durable. A CRASH kills the node's processes, then puts its
directory as the disk kept it: under fsync every name stays and each file's lost
writes are taken back (the first j pending writes stay under `fsync partial`); under
strict the tree is rebuilt from the durable listings. After it, what is on disk is all
durable.

Identities are of one directory tree: a copy of a world (--fast) copies the tree and
`rekey`s the record to the copy's files.
"""
from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, replace

import xxhash

from ...errors import TargetError
from ..linux import _native
from .content import CHUNK, Content, sparse_range

MODES = ("fsync", "fsync partial", "strict", "off")


@dataclass(frozen=True)
class Write:
    """One unsynced change of a file, as the node issued it, with what it changed
    (recorded by Disk.wrote before it runs): the file's size before it and the
    bytes it overwrote, as sparse runs."""
    ident: tuple
    name: str           # the file's path in the node's directory when it was written
    kind: str           # "write", "truncate" (to offset) or "extend" (to offset + length)
    offset: int
    length: int
    data: bytes | None  # what it wrote (kept under fsync partial)
    size: int = 0       # the file's size before it (the caller knows it: an fstat)
    before: tuple = ()  # the bytes it overwrote: (offset, bytes) runs, zeros left out

    def span(self, size: int) -> tuple[int, int]:
        """The range of a file of that size whose bytes this change replaces."""
        if self.kind == "write":
            return self.offset, min(self.offset + self.length, size)
        if self.kind == "truncate":
            return self.offset, size
        return 0, 0

    def apply(self, content: Content) -> None:
        """Do it again on content (forward, from a saved image)."""
        if self.kind == "truncate":
            content.truncate(self.offset)
        elif self.kind == "extend":
            content.extend(self.offset + self.length)
        elif self.data is not None:
            content.write(self.offset, self.data)
        else:
            content.zero(self.offset, self.offset + self.length)
            content.extend(self.offset + self.length)

    def undo(self, content: Content) -> None:
        """Take it back from content (which it was the last change of)."""
        start, end = self.span(self.size)
        if start < end:
            content.zero(start, end)
            for off, data in self.before:
                content.write(off, data)
        content.truncate(self.size)

    def describe(self) -> str:
        if self.kind == "truncate":
            return f"truncate {self.name} to {self.offset}"
        if self.kind == "extend":
            return f"allocate {self.name} to {self.offset + self.length}"
        return f"write {self.name} @{self.offset} +{self.length}"


def file_id(path: str) -> tuple:
    return _native.file_id(path)


def _walk(root: str):
    """(relative path, kind, full path, lstat) of everything under root, sorted,
    parents first; kind is file, dir, link or other."""
    out = []

    def visit(folder: str, rel: str):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            full = os.path.join(folder, name)
            r = f"{rel}{name}"
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                out.append((r, "dir", full, st))
                visit(full, r + "/")
            elif stat.S_ISREG(st.st_mode):
                out.append((r, "file", full, st))
            elif stat.S_ISLNK(st.st_mode):
                out.append((r, "link", full, st))
            else:
                out.append((r, "other", full, st))
    visit(root, "")
    return out


class Disk:
    def __init__(self, mode: str, root: str):
        assert mode in MODES, mode
        self.mode = mode
        self.on = mode != "off"
        self.partial = mode == "fsync partial"
        self.strict = mode == "strict"
        self.root = root
        # Saved durable images (runs, size), by identity: only where a file's durable
        # contents are not its current ones with its pending writes taken back (a
        # synced write over unsynced ones, a synced range, a removed name under strict)
        self.saved: dict[tuple, tuple[tuple, int]] = {}
        self.pending: list[Write] = []
        self.dirs: dict[tuple, dict[str, tuple]] = {}
        self.root_ident = file_id(root) if self.on else None
        if self.strict:
            self.dirs[self.root_ident] = self._listing(root)
        self.thrown: list[str] = []     # what the last CRASH threw away (for reports)
        # files a process of the node maps shared and writable: what it stores there
        # reaches the file unseen, so their durable images are saved (and saved again
        # at each sync), and the digest reads them at every fingerprint
        self.mapped: set[tuple] = set()
        # every change of the node's tree that cmc sees (a recorded write, a sync, a
        # name made or removed: calls/files.py) counts here; the digest is kept for it
        self.generation = 0
        self._digest: tuple[int, str] | None = None
        self.compacted = -1             # the generation Cluster.compact last saw

    def changed(self) -> None:
        self.generation += 1

    # -- durable contents ------------------------------------------------------------
    def _durable(self, ident: tuple, path: str | None, kept=(), lost=None) -> Content:
        """ident's durable contents with the writes `kept` (of the pending ones)
        reached; path: where it is now (None: nowhere). Without a saved image they
        are its current contents with the others (`lost`: all) taken back."""
        if ident in self.saved:
            runs, size = self.saved[ident]
            c = Content(runs=runs, size=size)
            for w in kept:
                if w.ident == ident:
                    w.apply(c)
            return c
        if path is None:
            return Content()
        c = Content.of_path(path)
        for w in reversed(self.pending if lost is None else lost):
            if w.ident == ident:
                w.undo(c)
        return c

    def _save(self, ident: tuple, path: str | None) -> None:
        with self._durable(ident, path) as c:
            self.saved[ident] = (c.runs(), c.size)

    # -- what the node does ----------------------------------------------------------
    def wrote(self, w: Write, sync: bool) -> None:
        """Record write w (about to run natively, on the file named w.name in the
        node's directory, of size w.size); with sync it is durable at once."""
        self.generation += 1
        path = os.path.join(self.root, w.name)
        if sync:
            if w.ident in self.saved or any(p.ident == w.ident for p in self.pending):
                with self._durable(w.ident, path) as c:
                    w.apply(c)
                    self.saved[w.ident] = (c.runs(), c.size)
            return
        start, end = w.span(w.size)
        before = ()
        if end > start:                  # it overwrites something: keep what
            try:
                with open(path, "rb") as f:
                    before = sparse_range(f.fileno(), start, end)
            except OSError:
                pass
        data = w.data if self.partial or w.kind != "write" else None
        self.pending.append(replace(w, data=data, before=before))

    def mapped_shared(self, ident: tuple, path: str) -> None:
        """A process maps the file at path shared and writable: from here on, what it
        stores is an unsynced write until an fsync, fdatasync or msync(MS_SYNC)."""
        self.generation += 1
        self.mapped.add(ident)
        if ident not in self.saved:
            self._save(ident, path)

    def synced(self, ident: tuple, path: str | None = None) -> None:
        """A file's current contents were made durable (fsync of it, at path)."""
        self.saved.pop(ident, None)
        self.pending = [w for w in self.pending if w.ident != ident]
        if ident in self.mapped and path is not None:
            self._save(ident, path)           # later stores are unsynced again
        self.generation += 1

    def synced_range(self, ident: tuple, name: str, start: int, end: int | None) -> None:
        """sync_file_range over [start, end) (end None: to the end of the file)."""
        path = os.path.join(self.root, name)
        with Content.of_path(path) as now:
            if start == 0 and (end is None or end >= now.size):
                self.synced(ident, path)
                return
            stop = now.size if end is None else min(end, now.size)
            with self._durable(ident, path) as c:
                c.extend(stop)
                for pos in range(start, stop, CHUNK):
                    n = min(CHUNK - pos % CHUNK, stop - pos)
                    c.write(pos, now.chunk(pos // CHUNK)[pos % CHUNK:pos % CHUNK + n])
                self.saved[ident] = (c.runs(), c.size)
        self.pending = [w for w in self.pending if not (
            w.ident == ident and w.kind == "write" and start <= w.offset and
            (end is None or w.offset + w.length <= end))]
        self.generation += 1

    def removing(self, path: str) -> None:
        """Under strict, a name is about to be removed (unlink, or a rename over
        it): a file whose last name it is keeps its durable contents here while a
        durable listing still names it."""
        if not self.strict:
            return
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return
        ident = file_id(path)
        if ident in self.saved or not any(
                e[0] == "file" and e[1] == ident for v in self.dirs.values() for e in v.values()):
            return
        self._save(ident, path)

    def dir_synced(self, ident: tuple, path: str) -> None:
        """fsync of a directory: under strict, its listing becomes durable."""
        if self.strict:
            self.dirs[ident] = self._listing(path)
        self.generation += 1

    def synced_all(self, root: str) -> None:
        """sync/syncfs: everything of the node is durable."""
        self._all_durable(root)
        for rel, kind, full, st in _walk(root) if self.mapped else ():
            ident = file_id(full) if kind == "file" else None
            if ident in self.mapped and ident not in self.saved:
                self._save(ident, full)
        self.generation += 1

    # -- a CRASH -----------------------------------------------------------------------
    def crash(self, root: str, reached: int = 0) -> None:
        """The node's processes are gone: put its directory as the disk kept it,
        with the first `reached` unsynced writes applied (fsync partial)."""
        if not self.on:
            return
        kept, lost = self.pending[:reached], self.pending[reached:]
        thrown = [w.describe() for w in lost]
        if self.strict:
            thrown += self._rebuild(root, kept, lost)
        else:
            todo = {w.ident for w in lost} | set(self.saved)
            for rel, kind, full, st in _walk(root) if todo else ():
                ident = file_id(full) if kind == "file" else None
                if ident not in todo:
                    continue
                todo.discard(ident)         # one name of it is enough
                with self._durable(ident, full, kept, lost) as c:
                    fd = os.open(full, os.O_RDWR | os.O_CLOEXEC)
                    try:
                        c.write_to(fd, whole=ident in self.saved)
                    finally:
                        os.close(fd)
        self.thrown = thrown
        self._all_durable(root)
        self.mapped = set()                 # the processes that mapped them are gone
        self.generation += 1

    def _rebuild(self, root: str, kept: list, lost: list) -> list[str]:
        """strict: the tree as the durable listings say; returns the names lost."""
        before = _walk(root)
        trash = root + ".crashed"
        where = {}
        for rel, kind, full, st in before:
            if kind == "file":
                where.setdefault(file_id(full), os.path.join(trash, rel))
        os.mkdir(trash)
        for name in os.listdir(root):
            os.rename(os.path.join(root, name), os.path.join(trash, name))
        made: dict[tuple, str] = {}
        seen: set = set()

        def build(ident, folder):
            if ident in seen:
                return
            seen.add(ident)
            for name, entry in sorted(self.dirs.get(ident, {}).items()):
                path = os.path.join(folder, name)
                kind = entry[0]
                if kind == "link":
                    os.symlink(entry[1], path)
                elif kind == "dir":
                    os.mkdir(path, entry[2])
                    build(entry[1], path)
                elif entry[1] in made:
                    os.link(made[entry[1]], path)
                else:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, entry[2])
                    try:
                        with self._durable(entry[1], where.get(entry[1]), kept, lost) as c:
                            c.write_to(fd, whole=True)
                    finally:
                        os.close(fd)
                    made[entry[1]] = path
        build(self.root_ident, root)
        shutil.rmtree(trash, ignore_errors=True)
        after = {rel for rel, *_ in _walk(root)}
        return [f"name {rel}" for rel in sorted({rel for rel, *_ in before} - after)]

    def _all_durable(self, root: str) -> None:
        self.pending = []
        self.saved = {}
        if self.strict:
            self.dirs = {self.root_ident: self._listing(root)}
            for rel, kind, full, st in _walk(root):
                if kind == "dir":
                    self.dirs[file_id(full)] = self._listing(full)

    @staticmethod
    def _listing(path: str) -> dict[str, tuple]:
        out = {}
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[name] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[name] = ("dir", file_id(full), stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                out[name] = ("file", file_id(full), stat.S_IMODE(st.st_mode))
        return out

    # -- a copy of the world (--fast) ------------------------------------------------
    def rekey(self, old_root: str, new_root: str) -> None:
        """The tree at old_root was copied to new_root: the record follows the copy's
        files (a file no name reaches keeps its old identity: no file of the copy
        has it)."""
        self.root = new_root
        if not self.on:
            return
        moved = {self.root_ident: file_id(new_root)}
        for rel, kind, full, st in _walk(old_root):
            if kind in ("file", "dir"):
                moved[file_id(full)] = file_id(os.path.join(new_root, rel))
        self.root_ident = moved[self.root_ident]
        self.saved = {moved.get(k, k): v for k, v in self.saved.items()}
        self.mapped = {moved.get(k, k) for k in self.mapped}
        self.pending = [replace(w, ident=moved.get(w.ident, w.ident)) for w in self.pending]
        self.dirs = {moved.get(k, k): {name: _moved_entry(e, moved) for name, e in v.items()}
                     for k, v in self.dirs.items()}

    # -- what a world holds --------------------------------------------------------------
    def digest(self, root: str) -> str:
        """The current and durable contents and the unsynced writes, as a digest of
        names and contents (no identities: those differ between runs); computed
        again only when the tree changed."""
        if self._digest is not None and self._digest[0] == self.generation and not self.mapped:
            return self._digest[1]
        h = xxhash.xxh3_128()
        durable: dict[tuple, bytes] = {}
        writing = {w.ident for w in self.pending}
        for rel, kind, full, st in _walk(root):
            h.update(f"{kind} {rel}\0".encode())
            if kind == "file":
                ident = file_id(full)
                with Content.of_path(full) as c:
                    now = c.digest()
                if ident not in durable:
                    if ident in self.saved or ident in writing:
                        with self._durable(ident, full) as c:
                            durable[ident] = c.digest()
                    else:
                        durable[ident] = now
                h.update(now + durable[ident])
            elif kind == "link":
                h.update(os.readlink(full).encode())
        h.update(b"\1")
        for w in self.pending if self.partial else ():    # else: the images decide
            h.update(f"{w.name} {w.kind} {w.offset} {w.length}\0".encode())
            if w.data is not None:
                h.update(xxhash.xxh3_64_digest(w.data))
        if self.strict:
            h.update(b"\2")
            seen: set = set()

            def image(ident) -> bytes:
                if ident not in durable:
                    with self._durable(ident, None) as c:
                        durable[ident] = c.digest()
                return durable[ident]

            def listed(ident, rel):
                if ident in seen:
                    return
                seen.add(ident)
                for name, entry in sorted(self.dirs.get(ident, {}).items()):
                    h.update(f"{entry[0]} {rel}{name}\0".encode())
                    if entry[0] == "dir":
                        listed(entry[1], f"{rel}{name}/")
                    elif entry[0] == "file":
                        h.update(image(entry[1]))
                    else:
                        h.update(entry[1].encode())
            listed(self.root_ident, "")
        self._digest = (self.generation, h.hexdigest())
        return self._digest[1]

    def unsynced(self) -> list[str]:
        """The unsynced writes in words, in issue order."""
        return [w.describe() for w in self.pending]


def _moved_entry(entry: tuple, moved: dict) -> tuple:
    if entry[0] == "link":
        return entry
    return (entry[0], moved.get(entry[1], entry[1])) + entry[2:]


def reached_another_world() -> TargetError:
    return TargetError(
        "a copy of a world made by --fast changed the files of the world it was "
        "copied from: a node reaches its files through a path it kept from its "
        "start (not through its working directory or HOME), so its worlds cannot "
        "be copied; check it with --no-fast")


def in_another_world(node, path: str) -> bool:
    """Whether path lies in the directory of another world of this run (copying: each
    world's nodes work in directories of their own, beside the others'; a node's may
    lie in the root of the world it was first copied in, fork.py)."""
    root = node.setting.own_root
    if root is None:
        return False
    return path.startswith(os.path.dirname(root) + "/") and not any(
        path == n.cwd or path.startswith((n.cwd + "/", n.cwd + ".shm/"))
        for n in node.setting.nodes)
