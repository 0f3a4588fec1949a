"""Copying a world: its record copied, its processes shared until a world runs them.

A world is quiescent between actions: every live node process is held in one
pending notification. `fork_world` copies cmc's record of it (network, sockets,
held calls, clocks; closures that complete held calls included) and *lends* every
node -- its processes and its directory -- to both worlds (`Lease`). A world takes a
lent node before it runs it, crashes it or starts it again (`Lease.take`): the last world
using the lease takes it as it is; otherwise

- the held process is forked by injection (csrc: `cmc_fork_threads`): the copy is a
  child of cmc in its own process group, working in its own copy of the node's
  directory, and both processes make their held call again, as new notifications
  on the listener they share (`Tap`); the lease keeps the original's;
- descriptors that a fork would share between the two worlds are replaced in the
  copy: a regular file or directory is opened again (the copy of it, when it lies
  in the node's directory) with the same flags and offset, and an epoll instance
  cmc made is replaced by an empty one (cmc keeps its registrations). A file
  outside the node's directory opened only to append to (stdout, stderr) is
  shared: both worlds append to it, and neither reads it;
- HOME, which cmc sets to the node's directory, is pointed at the copy's (in the
  environment block; node directories have names of one length).

A node of several threads has each made again in the copy (`cmc_fork_threads`), from
what the kernel keeps of each thread as read when the thread was last stopped: a thread
that has not run since it was (Thread.kept) is left in its held call; a node
that is a process tree of one level is copied into a PID namespace of its own
(`cmc_fork_tree`, `Lease._fork_tree`; docs/design.md, "Copies of process trees"), and a
lease whose first process is such a namespace's first process is a template, never run
again once lent (`Lease.retire`).

A world that cannot be copied faithfully raises NotForkable, and the engine replays
it instead: a tree deeper than one level (and the rest `forkable` finds), found before
anything is touched; a pipe, an AF_UNIX socket or
another kernel object shared with the copy, a deleted open file, a file of its
directory mapped into memory, or an epoll instance holding real descriptors, found
when the node is first forked (the step is then taken again on a replay). A lent
directory must be as it was lent when it is next used or given up (`Lease.check`):
otherwise a copy reached it through a path the node kept, and cmc stops rather
than give an answer replay would not.
"""
from __future__ import annotations

import os
import shutil
import signal
import time

from ...errors import EngineError
from ...interrupts import interrupts_held
from ..linux import _native, procfs
from ..linux.syscalls import ALWAYS, NAME, NATIVE, ON_CHILD, ROWS, nrs
from ..calls import shm
from ..world.content import copy_tree
from ..world.disk import reached_another_world
from .copyplan import NotForkable, fd_plan, home_address, move_home, replace_fds, tree_plan
from .reaping import end_status
from .record import _BY_IDENTITY, load_record, save_record

# How long a process made to re-issue its held call may take to do so: a notification
# arrives within microseconds; seconds mean the process went astray (a copy failed).
REBIND_TIMEOUT_S = 5.0


class ForkFailed(EngineError):
    """Forking a node failed part way: the world it was taken from is spoilt."""


# -- directories ----------------------------------------------------------------------
# A world's root holds its out/ directory, and at launch the nodes' directories; a
# node forked gets a root of its own (`Roots`) for its copy of the directory. A
# node's directory stays where it was made for as long as it is used, in whichever
# world. So a root is removed when the world and every node directory in it are
# gone: each holds it once.
_ROOT_USERS: dict[str, int] = {}


class Roots:
    """Where a world's copies of node directories go: `make()` gives a new root, as long
    as every other (the run's ClusterModel.new_root); and the run's kept starts."""
    def __init__(self, make):
        self.make = make
        self.zygotes = None              # zygote.Zygotes, made by the first Node.launch

    def close(self) -> None:
        if self.zygotes is not None:
            self.zygotes.close()
        _native.buried(REBIND_TIMEOUT_S)     # every node process killed is reaped


def hold_root(root: str | None) -> None:
    if root is not None:
        _ROOT_USERS[root] = _ROOT_USERS.get(root, 0) + 1


def drop_root(root: str | None) -> None:
    if root is None:
        return
    left = _ROOT_USERS.get(root, 1) - 1
    if left > 0:
        _ROOT_USERS[root] = left
        return
    _ROOT_USERS.pop(root, None)
    shutil.rmtree(root, ignore_errors=True)


def stamp(cwd: str) -> tuple:
    """What a node's directory holds (names, sizes, modification times)."""
    out = []
    for folder, dirs, files in os.walk(cwd):
        dirs.sort()
        for name in [""] + sorted(files):
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            out.append((folder, name, st.st_size, st.st_mtime_ns))
    return tuple(out)


# -- lent nodes -------------------------------------------------------------------------
class Lease:
    """A node's processes, frozen in the world they were lent from, with its
    directory (for a node that is down, the directory alone), shared by the records
    of every world that has not run the node since. `users`: how many records.

    While lent, nothing runs the processes or changes the directory: a world that
    runs the node first takes it (`take`), by a fork while others use it, else
    (the last user) as it is. A directory found changed when next used was changed
    through a path a copy kept to it (`check`)."""

    def __init__(self, node):
        self.pid = node.tasks.pid if node.tasks.alive else 0
        self.tap = node.tasks.tap if node.tasks.alive else None
        # tid -> its held notification, every thread's (forkable: all are held)
        self.held = {t.tid: t.notif for t in node.tasks.threads.values()} \
            if node.tasks.alive else {}
        # tid -> its state as the last fork read it (None: not read since it ran)
        self.kept = {t.tid: t.kept for t in node.tasks.threads.values()}
        self.cwd = node.cwd
        self.root = node.root
        self.users = 1
        self.plan = None                # (fd plan, HOME address), or NotForkable
        self.stamp = stamp(node.cwd)
        self.spoilt: str | None = None  # a fork from it failed part way
        # Copied as a process tree (`is_tree`): each copy's first process is process 1
        # of a PID namespace inside this one's. When this one's first process is
        # process 1 of a namespace itself (a copy, or machine pids private), its end
        # would end every copy made from it: such a lease is a *template*, never run
        # again once lent; it lives while a copy made from it does (`dependents`), and
        # ends when nobody uses it and no copy is left (`retire`).
        tasks = node.tasks
        self.is_tree = tasks.alive and is_tree(node)
        self.template = tasks.alive and (tasks.ns_root or node.own_pids)
        self.origin = tasks.origin      # the template this one was copied from
        self.dependents = 0
        self.pids = list(tasks.procs) if tasks.alive else []
        self.zombies = list(tasks.reapable) if self.is_tree else []

    def check(self) -> None:
        if stamp(self.cwd) != self.stamp:
            raise reached_another_world()

    def take(self, node, keep_process: bool = True) -> None:
        """Before node runs (or crashes, or starts again) in its world (Node.own). The
        last user takes it as it is. Otherwise the directory is copied into this
        world's root and, with `keep_process`, the process forked into it (without:
        a CRASH, which needs only the directory; the process stays with the others)."""
        if self.spoilt:
            raise ForkFailed(self.spoilt)
        self.check()
        if self.users == 1 and not self.template:
            self.users = 0
            node.lease = None
            node.root = self.root
            if node.tasks.alive:
                node.take_over(self.held)
                for tid, state in self.kept.items():
                    node.tasks.threads[tid].kept = state
            return
        world = node.setting.roots.make()
        cwd = os.path.join(world, "nodes", os.path.basename(self.cwd))
        fork = keep_process and node.tasks.alive
        if fork:
            if self.plan is None:
                try:
                    if self.is_tree:
                        live = [p for p in self.pids if p != node.tasks.pid]
                        order = [node.tasks.pid] + live
                        plans = tree_plan(node, order)
                        for pid, plan in zip(order, plans):
                            _tree_fds_placeable(node, pid, plan)
                        self.plan = (plans, [home_address(node, pid) for pid in order])
                    else:
                        self.plan = (fd_plan(node), home_address(node))
                except NotForkable as e:
                    self.plan = e
            if isinstance(self.plan, NotForkable):
                raise self.plan
            if len(cwd) != len(self.cwd):
                raise NotForkable("the copy's directory would not be as long as the original's")
        os.mkdir(world)
        os.mkdir(os.path.dirname(cwd))
        copy_tree(self.cwd, cwd)             # sparse: zeros stay holes
        shm.copy(self.cwd, cwd)    # and its shared-memory objects (shm.py)
        node.disk.rekey(self.cwd, cwd)       # the copy's page cache follows its files
        self.users -= 1
        node.lease = None
        node.cwd = cwd
        node.root = world
        hold_root(world)
        if not fork:
            node.let_go()
            self.retire()
            return
        if self.is_tree:
            self._fork_tree(node, cwd)
            return
        self.fork_into(node, cwd)

    def fork_into(self, node, cwd: str, waited: bool = True, unshare: int = 0) -> None:
        """The one process of the lease forked, working in `cwd`, as node's: node's
        record (a copy of the lease's) then names the copy's threads, each held in its
        call made again; the copy has descriptors and a HOME of its own (`waited`:
        replace_fds'; `unshare`: _native.fork_node's). A thread asleep natively in a
        wait cmc is notified of (ASLEEP_AGAIN) makes it again in both: the original's
        is let go into it at once, the copy's once the copy's descriptors are its own."""
        held = self.held
        # the thread that forks first: one held in a notified call
        order = sorted(held, key=lambda tid: held[tid] is None)
        asleep = {tid: node.tasks.threads[tid].native for tid in order if held[tid] is None}
        threads = [(tid, held[tid].id if held[tid] is not None else 0,
                    node.tasks.threads[tid].ctid) for tid in order]
        plan, home = self.plan
        maps = [(*m[1:6], os.path.join(cwd, m[6])) for m in plan if m[0] == "map"]
        known = [None if tid in asleep else self.kept.get(tid) for tid in order]
        with interrupts_held():               # no process started and not recorded
            try:
                tids, states = _native.fork_node(self.tap.fd, threads, cwd, maps, unshare,
                                                 known)
            except OSError as e:
                self.spoilt = (f"fork of node {node.name} ({len(threads)} thread(s)) "
                               f"failed: {e.strerror}")
                node.let_go()
                raise ForkFailed(self.spoilt) from None
            copies = dict(zip(order, tids))
            node.adopt(tids[0], self.tap, copies)
        self.kept = dict(zip(order, states))
        for tid, state in zip(tids, states):
            node.tasks.threads[tid].kept = state
        waking = []                           # the copy's sleepers' calls, made again
        try:
            for i, tid in enumerate(order):   # the original's stopped
                if tid in asleep:
                    _sleep_again(self.tap, self.pid, tid,
                                 _made_again(self.tap, tid, asleep[tid], node.name), node.name)
                elif i == 0 or known[i] is None:
                    held[tid] = _again(self.tap, tid, held[tid], node.name)
            node.tasks.rebind({copies[tid]: _again(self.tap, copies[tid], notif, node.name)
                               for tid, notif in held.items() if notif is not None})
            waking = [(copies[tid], _made_again(self.tap, copies[tid], nr, node.name))
                      for tid, nr in asleep.items()]
        except ForkFailed as e:
            self.spoilt = str(e)
            raise
        replace_fds(node, plan, self.cwd, self.pid, waited=waited)
        move_home(node, home)
        for tid, notif in waking:
            _sleep_again(self.tap, node.tasks.pid, tid, notif, node.name)

    def _fork_tree(self, node, cwd: str) -> None:
        """Lease.take for a process tree: every process copied (cmc_fork_tree), the
        copy's processes each given their own descriptors."""
        tasks = node.tasks
        held = self.held
        root = tasks.pid
        order = [root] + [p for p in self.pids if p != root]
        procs, maps, reopen = [], [], []
        plans, homes = self.plan
        plans = list(plans)
        for pid, plan in zip(order, plans):
            proc = tasks.procs[pid]
            threads = sorted((t for t in tasks.threads.values() if t.proc is proc),
                             key=lambda t: t.tid != pid)
            procs.append((procfs.ns_pid(pid), -1,
                          [(t.tid, held[t.tid].id if held.get(t.tid) else 0, t.ctid)
                           for t in threads]))
            maps.append([(*m[1:6], os.path.join(cwd, m[6])) for m in plan if m[0] == "map"])
            if not any(held.get(t.tid) for t in threads):     # asleep natively
                for item in plan:
                    if item[0] == "file":
                        _, fd, path, flags, pos, cloexec = item[:6]
                        if path == self.cwd or path.startswith(self.cwd + "/"):
                            path = cwd + path[len(self.cwd):]
                        reopen.append((len(procs) - 1, fd, path, flags, pos, cloexec))
                plans[len(procs) - 1] = [m for m in plan if m[0] == "map"]
        for z in self.zombies:
            procs.append((procfs.ns_pid(z), procfs.exit_code(z) or 0, []))
            maps.append([])
        pending = procfs.signal_mask(root, "ShdPnd") | procfs.signal_mask(root, "SigPnd")
        with interrupts_held():               # no process started and not recorded
            try:
                copies, pids = _native.fork_tree(self.tap.fd, procs, cwd, maps,
                                                 bool(pending & (1 << 16)), reopen)
            except OSError as e:
                self.spoilt = (f"fork of node {node.name} (a tree of {len(self.pids)} "
                               f"processes) failed: {e.strerror}")
                node.let_go()
                raise ForkFailed(self.spoilt) from None
            tid_map = {}
            for (_, _, threads), made in zip(procs, copies):
                tid_map.update((t[0], c) for t, c in zip(threads, made))
            n_live = len(order)
            tasks.attach_tree(self.tap, dict(zip(order, pids[:n_live])), tid_map,
                              pids[n_live:], os.getpid())
        if self.template:
            self.dependents += 1
            tasks.origin = self
        try:
            for tid, notif in held.items():                       # the original's
                if notif is not None:
                    held[tid] = _again(self.tap, tid, notif, node.name)
            tasks.rebind({tid_map[tid]: _again(self.tap, tid_map[tid], notif, node.name)
                          for tid, notif in held.items() if notif is not None})
            # a native call made again: asleep in it before anything can signal it (a
            # signal before would run its handler and then sleep, where the original
            # was woken with EINTR)
            for old, proc in zip(order, (tasks.procs[tid_map[p]] for p in order)):
                for tid, notif in held.items():
                    t = tasks.threads.get(tid_map.get(tid, 0))
                    if notif is None and t is not None and t.proc is proc:
                        _asleep_again(old, tid, t.native, node.name)
                        _asleep_again(proc.pid, t.tid, t.native, node.name)
        except ForkFailed as e:
            self.spoilt = str(e)
            raise
        shared: dict = {}
        try:
            for old, plan in zip(order, plans):
                if any(item[0] != "map" for item in plan):
                    replace_fds(node, plan, self.cwd, old, tasks.procs[tid_map[old]], shared)
        finally:
            for fd in shared.values():
                for one in (fd if isinstance(fd, tuple) else (fd,)):
                    os.close(one)
        for old, home in zip(order, homes):
            move_home(node, home, tasks.procs[tid_map[old]])
        if self.users == 0:
            self.retire()

    def give_back(self, node) -> bool:
        """node's record is done with the lease (its world is closed). True when it was
        the last user: the processes and the directory are then the record's, to end."""
        node.lease = None
        self.users -= 1
        if self.users == 0 and not self.template:
            node.root = self.root
            return True
        node.let_go()
        if self.users == 0:
            node.root = self.root        # the directory goes with the record's world
            self.retire()
        return False

    def dependent_gone(self) -> None:
        """A copy made from this template has ended."""
        self.dependents -= 1
        self.retire()

    def retire(self) -> None:
        """A template nobody uses, of which no copy is left, ends: its first process,
        with it its PID namespace (the kernel ends the others in it)."""
        if not self.template or self.users > 0 or self.dependents > 0 or not self.pids:
            return
        pids, self.pids = self.pids, []
        root = pids[0]
        with interrupts_held():
            try:
                os.kill(root, signal.SIGKILL)
            except ProcessLookupError:
                pass
            end_status(root)             # reaped when it comes to cmc (STRAYS)
            for pid in pids:
                if self.tap is not None:
                    self.tap.release(pid)
            _native.guard_forget(root)
        origin, self.origin = self.origin, None
        if origin is not None:
            origin.dependent_gone()


def lend(node) -> Lease:
    """Make node's processes (and directory) a lease, this record its first user:
    from now on they run only once taken (`Lease.take`)."""
    if node.lease is None:
        node.lease = Lease(node)
        node.root = None                 # the lease holds it
        node.tasks.unwatch()
    return node.lease


# Native calls a thread of a copied process tree may sleep in: the kernel restarts
# them when the copy is made (a parent waiting for its children)
TREE_NATIVE = nrs(lambda row: row.sleeps == ON_CHILD)
# Copies of copies nest one PID namespace deeper each; Linux allows 32 levels
MAX_NS_DEPTH = 30


def is_tree(node) -> bool:
    """Whether node is copied as a process tree (cmc_fork_tree): more than one
    process, an ended child not reaped, or a first process that is process 1 of a PID
    namespace (a copy of a tree, or machine pids private)."""
    tasks = node.tasks
    return (len(tasks.procs) > 1 or bool(tasks.reapable) or tasks.ns_root
            or node.own_pids)


def _tree_forkable(node) -> None:
    """forkable() for a process tree (docs/design.md, "Copies of process trees")."""
    tasks = node.tasks
    name = node.name
    root = tasks.procs.get(tasks.pid)
    if root is None:
        raise NotForkable(f"node {name}: the process cmc launched has ended, others run")
    if os.geteuid() != 0:
        raise NotForkable(f"node {name} has more than one process (a copy of a process "
                          "tree needs root, for its PID namespace)")
    if procfs.ns_depth(tasks.pid) >= MAX_NS_DEPTH:
        raise NotForkable(f"node {name}: copies of copies nested {MAX_NS_DEPTH} deep")
    for proc in tasks.procs.values():
        if proc is not root and proc.parent != root.number:
            raise NotForkable(f"node {name} has a process whose parent is not its first "
                              "(a grandchild)")
    for pid in tasks.reapable:
        status = procfs.exit_code(pid)
        try:
            ppid = int(procfs.status(pid).get("PPid", "0"))
        except ValueError:
            ppid = 0
        if status is None or ppid != tasks.pid:
            raise NotForkable(f"node {name} has an ended process that is not its first's "
                              "child")
        if not (os.WIFEXITED(status) or os.WTERMSIG(status) == signal.SIGKILL):
            raise NotForkable(f"node {name} has a child that died of signal "
                              f"{os.WTERMSIG(status)}, not reaped yet")
    for t in tasks.threads.values():
        if (t.notif is None or t.block is None) and t.native not in TREE_NATIVE:
            why = (f"sleeps natively in {NAME.get(t.native, t.native)}" if t.native is not None
                   else "is not held in a blocked call")
            raise NotForkable(f"node {name}: thread {t.index} of process {t.proc.number} {why}")
        pending = procfs.signal_mask(t.tid, "SigPnd") | procfs.signal_mask(t.tid, "ShdPnd")
        if t.proc is root:
            pending &= ~(1 << (signal.SIGCHLD - 1))   # made again with its zombies
        if pending:
            raise NotForkable(f"node {name}: process {t.proc.number} has a signal pending")
    for proc in tasks.procs.values():
        if not any(t.tid == proc.pid for t in tasks.threads.values() if t.proc is proc):
            raise NotForkable(f"node {name}: process {proc.number} has lost its first thread")


def _tree_fds_placeable(node, pid: int, plan: list) -> None:
    """A process of a tree whose threads all sleep natively has no held call through
    which cmc could give the copy its descriptors: the copy opens its files again
    itself (cmc_fork_tree), and the rest of its plan must be nothing but mappings."""
    tasks = node.tasks
    if any(t.notif is not None for t in tasks.threads.values() if t.proc.pid == pid):
        return
    if any(item[0] not in ("map", "file") or len(item) > 6 for item in plan):
        raise NotForkable(f"node {node.name}: a process that sleeps natively shares "
                          "descriptors a copy would need of its own")


def forkable(node) -> None:
    """What can be seen from cmc's record alone: a node that may be forked later.
    Raises NotForkable."""
    if not node.tasks.alive:
        return
    tasks = node.tasks
    tasks.reaped_since()
    if tasks.groups:
        raise NotForkable(f"node {node.name} has a process group of its own making")
    if tasks.clones or tasks.forking is not None:
        raise NotForkable(f"node {node.name} has a thread or process not seen yet")
    wipes = [p.number for p in tasks.procs.values() if p.wipes]
    if wipes:
        raise NotForkable(f"node {node.name}: process {wipes[0]} has memory a fork would "
                          "wipe (madvise MADV_WIPEONFORK)")
    if is_tree(node):
        _tree_forkable(node)
        return
    for t in tasks.threads.values():
        if t.notif is None or t.block is None:
            why = "is not held in a blocked call" if t.native is None else _asleep_why(t)
            if why:
                raise NotForkable(f"node {node.name}: thread {t.index} {why}")
    if all(t.notif is None for t in tasks.threads.values()):
        raise NotForkable(f"node {node.name}: no thread is held in a call (every one "
                          "sleeps natively)")


# Native waits a thread of a copied process (not a tree) may sleep in: notified always,
# so the thread, made to make its call again, is held until the copy's descriptors are
# its own, and then let go into it (Lease.fork_into; docs/design.md, "Copies of
# threaded nodes"). The kernel restarts those of the poll family that an interrupt
# ends; the epoll family's EINTR is taken back (csrc/fork.c, read_stopped).
ASLEEP_AGAIN = nrs(lambda row: row.sleeps == NATIVE and row.notified == ALWAYS)
_MASK_ARG = {row.nr: row.mask for row in ROWS if row.mask is not None}


def _asleep_why(t) -> str | None:
    """Why thread t, asleep natively, is no thread a copy can make again (None: it is):
    not a call of ASLEEP_AGAIN, a signal mask of its own (its restart would keep the
    mask), or a signal pending (an EINTR that was the program's)."""
    name = NAME.get(t.native, t.native)
    if t.native not in ASLEEP_AGAIN:
        return f"sleeps natively in {name}"
    k = _MASK_ARG.get(t.native)
    if k is not None:
        args = procfs.syscall_args(t.proc.pid, t.tid) or [0] * 6
        mask = args[k] if k >= 0 else args[-k - 1]
        if k < 0 and mask:               # the first word of what the argument points to
            mask = int.from_bytes(_native.read_mem(t.proc.pid, mask, 8) or bytes(8), "little")
        if mask:
            return f"sleeps natively in {name} under a signal mask of its own"
    if procfs.signal_mask(t.tid, "SigPnd") | procfs.signal_mask(t.tid, "ShdPnd"):
        return f"sleeps natively in {name} with a signal pending"
    return None


def _made_again(tap, tid: int, nr: int, name: str):
    """The notification of thread tid, asleep in call nr at a fork, making it again."""
    notif = tap.recv_for(tid, REBIND_TIMEOUT_S)
    if notif is None or notif.nr != nr:
        raise ForkFailed(f"fork of node {name}: a thread asleep in {NAME.get(nr, nr)} did "
                         f"not make it again (got {notif and NAME.get(notif.nr, notif.nr)})")
    return notif


def _sleep_again(tap, pid: int, tid: int, notif, name: str) -> None:
    """Thread tid of pid, its native wait made again as `notif`, is let go into it."""
    _native.respond(tap.fd, notif.id, cont=True)
    _asleep_again(pid, tid, notif.nr, name)


def _asleep_again(pid: int, tid: int, nr: int, name: str) -> None:
    """Thread tid of pid, made to make its native call nr again (a tree's copy), is
    asleep in it."""
    deadline = time.monotonic() + REBIND_TIMEOUT_S
    while True:
        state, now = procfs.task_state(pid, tid)
        if state == "S" and now == nr:
            return
        if state in "XZ" or time.monotonic() > deadline:
            raise ForkFailed(f"fork of node {name}: a thread did not go back to sleep in "
                             f"{NAME.get(nr, nr)}")
        time.sleep(0.0002)


def _again(tap, pid: int, held, name: str):
    """Process pid was made to issue its held call `held` again: the new notification."""
    notif = tap.recv_for(pid, REBIND_TIMEOUT_S)
    if notif is None or notif.nr != held.nr or notif.args != held.args:
        raise ForkFailed(f"fork of node {name}: its held call did not come back "
                         f"({held.nr} expected, got {notif and notif.nr})")
    return notif


_BY_IDENTITY.update((Lease, Roots))


def fork_world(cluster, root: str, saved: list | None = None):
    """A copy of `cluster` (a quiescent world) working under directory `root`: its
    record copied, every node lent to both (nothing is forked until a world runs
    the node, `Lease.take`). Raises NotForkable for a world a node of which could not be
    forked when it runs. `saved`, a list the caller keeps while nothing runs `cluster`
    (and empties when something does): its pickled record, made by the first copy
    and loaded again by the next (lending a node twice changes nothing)."""
    setting = cluster.setting
    if setting.own_root is None or len(root) != len(setting.own_root):
        raise NotForkable("the copy's directory would not be as long as the original's")
    for n in cluster.nodes:
        forkable(n)
        if n.lease is not None and isinstance(n.lease.plan, NotForkable):
            raise n.lease.plan          # found when a copy of this world tried to fork it
    leases = [lend(n) for n in cluster.nodes]
    if saved is None:
        saved = []
    if not saved:
        saved.append(save_record(cluster, [cluster.spec]))   # leases and listeners shared
    twin = load_record(saved[0])
    setting = twin.setting
    setting.own_root = root
    setting.outdir = os.path.join(root, "out")     # for the nodes it launches again
    os.makedirs(setting.outdir)
    hold_root(root)
    setting.calls = []
    for lease in leases:
        lease.users += 1
    return twin
