"""The disk (SPEC §9.3): a page cache over the files of a node's working directory.

Writes run natively, so a program sees its files as it wrote them and a write costs
one notification. What a CRASH keeps is cmc's record, kept beside the real files:

- `images`: the durable contents of each file that was made durable, by the file's
  identity (device, inode, birth time: the same across renames, never the same for
  two files). A file without an image has no durable contents (it is empty after a
  CRASH).
- `pending`: the unsynced writes, in the order the node issued them (a write, a
  truncate, an extension), each with the bytes it wrote under `fsync partial`.
- `dirs` (strict only): the durable listing of each directory that was fsynced (and
  of the node's directory as it started: empty), name -> (kind, identity or target).

fsync/fdatasync of a file (and sync_file_range with WAIT_AFTER) make its current
contents its image, and drop its pending writes; a write through a descriptor opened
with O_SYNC/O_DSYNC (or pwritev2 with RWF_SYNC/RWF_DSYNC) goes to the image as it is
made; sync/syncfs make every file (and under strict every listing) durable. A CRASH
kills the node's processes, then rewrites its directory from the record: under fsync
every name stays and each file gets its image (plus, under `fsync partial`, the first
j pending writes); under strict the tree is rebuilt from the durable listings. After
it, what is on disk is all durable.

Identities are of one directory tree: a copy of a world (--fast) copies the tree and
`rekey`s the record to the copy's files.
"""
from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass

import xxhash

from ..errors import TargetError
from . import _native

MODES = ("fsync", "fsync partial", "strict", "off")


@dataclass(frozen=True)
class Write:
    """One unsynced change of a file, as the node issued it."""
    ident: tuple
    name: str           # the file's path in the node's directory when it was written
    kind: str           # "write", "truncate" (to offset) or "extend" (to offset + length)
    offset: int
    length: int
    data: bytes | None  # what it wrote (kept under fsync partial)

    def apply(self, content: bytes) -> bytes:
        if self.kind == "truncate":
            return content[:self.offset] + b"\0" * max(0, self.offset - len(content))
        if self.kind == "extend":
            end = self.offset + self.length
            return content + b"\0" * max(0, end - len(content))
        data = self.data if self.data is not None else b"\0" * self.length
        if self.offset > len(content):
            content += b"\0" * (self.offset - len(content))
        return content[:self.offset] + data + content[self.offset + len(data):]

    def describe(self) -> str:
        if self.kind == "truncate":
            return f"truncate {self.name} to {self.offset}"
        if self.kind == "extend":
            return f"allocate {self.name} to {self.offset + self.length}"
        return f"write {self.name} @{self.offset} +{self.length}"


def file_id(path: str) -> tuple:
    return _native.file_id(path)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


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
        self.images: dict[tuple, bytes] = {}
        self.pending: list[Write] = []
        self.dirs: dict[tuple, dict[str, tuple]] = {}
        self.root_ident = file_id(root) if self.on else None
        if self.strict:
            self.dirs[self.root_ident] = self._listing(root)
        self.thrown: list[str] = []     # what the last CRASH threw away (for reports)
        # every change of the node's tree that cmc sees (a recorded write, a sync, a
        # name made or removed: diskcalls.py) counts here; the digest is kept for it
        self.generation = 0
        self._digest: tuple[int, str] | None = None

    def changed(self) -> None:
        self.generation += 1

    # -- what the node does ----------------------------------------------------------
    def wrote(self, w: Write, sync: bool) -> None:
        """Record write w (about to run natively); with sync it is durable at once."""
        self.generation += 1
        if sync:
            self.images[w.ident] = w.apply(self.images.get(w.ident, b""))
        else:
            self.pending.append(w if self.partial or w.kind != "write" else
                                Write(w.ident, w.name, w.kind, w.offset, w.length, None))

    def synced(self, ident: tuple, content: bytes) -> None:
        """A file's current contents were made durable (fsync of it)."""
        self.images[ident] = content
        self.pending = [w for w in self.pending if w.ident != ident]
        self.generation += 1

    def synced_range(self, ident: tuple, content: bytes, start: int, end: int | None) -> None:
        """sync_file_range over [start, end) (end None: to the end of the file)."""
        if start == 0 and (end is None or end >= len(content)):
            self.synced(ident, content)
            return
        stop = len(content) if end is None else min(end, len(content))
        image = self.images.get(ident, b"")
        if len(image) < stop:
            image += b"\0" * (stop - len(image))
        self.images[ident] = image[:start] + content[start:stop] + image[stop:]
        self.pending = [w for w in self.pending if not (
            w.ident == ident and w.kind == "write" and start <= w.offset and
            (end is None or w.offset + w.length <= end))]
        self.generation += 1

    def dir_synced(self, ident: tuple, path: str) -> None:
        """fsync of a directory: under strict, its listing becomes durable."""
        if self.strict:
            self.dirs[ident] = self._listing(path)
        self.generation += 1

    def synced_all(self, root: str) -> None:
        """sync/syncfs: everything of the node is durable."""
        self._all_durable(root)
        self.generation += 1

    # -- a CRASH -----------------------------------------------------------------------
    def crash(self, root: str, reached: int = 0) -> None:
        """The node's processes are gone: put its directory as the disk kept it,
        with the first `reached` unsynced writes applied (fsync partial)."""
        if not self.on:
            return
        images = dict(self.images)
        kept, lost = self.pending[:reached], self.pending[reached:]
        for w in kept:
            images[w.ident] = w.apply(images.get(w.ident, b""))
        thrown = [w.describe() for w in lost]
        if self.strict:
            thrown += self._rebuild(root, images)
        else:
            for rel, kind, full, st in _walk(root):
                if kind != "file":
                    continue
                want = images.get(file_id(full), b"")
                if st.st_size != len(want) or _read(full) != want:
                    with open(full, "r+b") as f:
                        f.truncate(0)
                        f.write(want)
        self.thrown = thrown
        self._all_durable(root)
        self.generation += 1

    def _rebuild(self, root: str, images: dict) -> list[str]:
        """strict: the tree as the durable listings say; returns the names lost."""
        before = {rel for rel, *_ in _walk(root)}
        trash = root + ".crashed"
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
                        os.write(fd, images.get(entry[1], b""))
                    finally:
                        os.close(fd)
                    made[entry[1]] = path
        build(self.root_ident, root)
        shutil.rmtree(trash, ignore_errors=True)
        after = {rel for rel, *_ in _walk(root)}
        return [f"name {rel}" for rel in sorted(before - after)]

    def _all_durable(self, root: str) -> None:
        self.pending = []
        self.images = {}
        for rel, kind, full, st in _walk(root):
            if kind == "file":
                self.images[file_id(full)] = _read(full)
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
        if not self.on:
            return
        moved = {self.root_ident: file_id(new_root)}
        for rel, kind, full, st in _walk(old_root):
            if kind in ("file", "dir"):
                moved[file_id(full)] = file_id(os.path.join(new_root, rel))
        self.root_ident = moved[self.root_ident]
        self.images = {moved.get(k, k): v for k, v in self.images.items()}
        self.pending = [Write(moved.get(w.ident, w.ident), *_rest(w)) for w in self.pending]
        self.dirs = {moved.get(k, k): {name: _moved_entry(e, moved) for name, e in v.items()}
                     for k, v in self.dirs.items()}

    # -- what a world holds --------------------------------------------------------------
    def digest(self, root: str) -> str:
        """The durable contents and the unsynced writes, as a digest of names and
        contents (no identities: those differ between runs); computed again only
        when the tree changed."""
        if self._digest is not None and self._digest[0] == self.generation:
            return self._digest[1]
        h = xxhash.xxh3_128()
        for rel, kind, full, st in _walk(root):
            h.update(f"{kind} {rel}\0".encode())
            if kind == "file":
                ident = file_id(full)
                h.update(xxhash.xxh3_64_digest(_read(full)))
                h.update(xxhash.xxh3_64_digest(self.images.get(ident, b"")))
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

            def durable(ident, rel):
                if ident in seen:
                    return
                seen.add(ident)
                for name, entry in sorted(self.dirs.get(ident, {}).items()):
                    h.update(f"{entry[0]} {rel}{name}\0".encode())
                    if entry[0] == "dir":
                        durable(entry[1], f"{rel}{name}/")
                    elif entry[0] == "file":
                        h.update(xxhash.xxh3_64_digest(self.images.get(entry[1], b"")))
                    else:
                        h.update(entry[1].encode())
            durable(self.root_ident, "")
        self._digest = (self.generation, h.hexdigest())
        return self._digest[1]

    def unsynced(self) -> list[str]:
        """The unsynced writes in words, in issue order."""
        return [w.describe() for w in self.pending]


def _rest(w: Write) -> tuple:
    return (w.name, w.kind, w.offset, w.length, w.data)


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
    root = node.cluster.own_root
    if root is None:
        return False
    return path.startswith(os.path.dirname(root) + "/") and not any(
        path == n.cwd or path.startswith(n.cwd + "/") for n in node.cluster.nodes)
