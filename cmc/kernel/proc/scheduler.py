"""Running a node: every thread of every process of it, one at a time.

The process runs until it makes a notified call. `Node.run` answers calls that can
complete at once and stops at the first one that cannot: the node is then
*quiescent*, holding one pending notification that an environment action (a
delivery, a timeout firing, a reset) may complete later. A node whose process
has exited is quiescent too.

How the notification loop works, and why (`run`, `_next_notification`, `_answer`):

- *One listener, several processes.* A node's seccomp listener belongs to the
  filter, and a process forked from the node (a --fast copy, fork.py) runs under the
  same filter: its calls arrive on the same listener. So a notification is taken for
  the process it came from (`Notification.pid`); one of another process on the
  listener is put aside in the `Tap`'s stash, and that process takes it from there
  when it runs. The listener is closed when its last process is gone.
- *The end of a process is seen on a pidfd,* not on the listener: the listener hangs
  up (POLLHUP) only when every process under the filter has exited, which for a node
  with copies may be never while the node is long dead. Both are polled together,
  with the watchdog as the only timeout: a node that neither blocks nor exits within
  it is a target error, never a hang.
- *An answer to a target that is gone* fails with ENOENT: it was killed (with
  WAIT_KILLABLE_RECV a non-fatal signal waits for the answer instead of withdrawing
  the call, so a call is not re-issued behind cmc's back). `_answer` reports that as
  False and the loop collects the exit.
- *CONTINUE* lets the call run natively in the target (a file, a pipe, the exec
  that `calls.sys_execve` traces). Most opens never reach this loop: the C helper
  answers them with CONTINUE itself (filter.PASS_OPEN).
- *A call that cannot complete* is held: its notification stays unanswered, which
  keeps the target frozen inside the call until an environment action lets the
  handler's `attempt` complete it (`try_wake`) or its timeout fires (`fire`).
"""

from __future__ import annotations

import os
import select
import signal
import time

from ...errors import EngineError, NotForkable, TargetError
from ..calls.answer import ANSWERED, CONTINUE, Block, Err
from ..calls.calllog import render
from ..calls.dispatch import dispatch
from ..calls.sockets import close_all
from ..linux import _native, procfs
from ..linux.procfs import task_children, task_cpu, task_ids, task_state
from ..calls.handler import fd_arg, signed
from ..linux.syscalls import NAME, NR, ON_CHILD, ROWS, nrs
from ..world.net import fmt_addr
from .reaping import end_status
from .tasks import Tasks, _past_fork

# CLOCK_REALTIME starts at 2026-01-01T00:00:00Z, CLOCK_MONOTONIC at 1000 s
# (docs/target-contract.md, "Time").
REALTIME_START_NS = 1767225600 * 10**9
MONOTONIC_START_NS = 1000 * 10**9
from .tasks import NATIVE_WAITS, Process, Thread

# What the kernel makes of an interrupted call's return (include/linux/errno.h): with a
# signal handler, ERESTARTSYS is EINTR unless SA_RESTART (then the call is made again);
# ERESTARTNOHAND is EINTR; with no handler run, either is made again.
ERESTARTSYS, ERESTARTNOHAND = 512, 514
# (calls Linux never restarts; calls that may vfork; waits for a child: linux/syscalls.py)
NO_RESTART = frozenset(row.name for row in ROWS if not row.restarts)
VFORKS = nrs(lambda row: row.vfork)
WAITS_FOR_CHILD = nrs(lambda row: row.sleeps == ON_CHILD)

# Totals for benchmarks (experiments/bench.py): launches and notifications answered.
COUNTERS = {"launches": 0, "notifications": 0, "zygote starts": 0}


WALL, WCLONE, WEXITED = 0x40000000, 0x80000000, 4


def _child_to_reap(t: Thread, nr: int) -> bool:
    """Whether thread t, asleep in wait4 or waitid, has a child that ended and that its
    wait takes: the kernel has made the child a zombie and is about to wake the
    parent (its pidfd tells cmc of the end a moment before the parent is woken), so
    the parent is not settled yet."""
    args = procfs.syscall_args(t.proc.pid, t.tid)
    if not args:
        return False
    if nr == NR["wait4"]:
        want, options = signed(args[0]), args[2]
    else:
        idtype, ident, options = args[0], args[1], args[3]
        if not options & WEXITED:
            return False
        want = -1 if idtype == 0 else ident if idtype == 1 else 0
    for tid in task_ids(t.proc.pid):
        for child in task_children(t.proc.pid, tid):
            if procfs.exit_code(child) is None:
                continue
            if procfs.exit_signal(child) != signal.SIGCHLD and not options & (WALL | WCLONE):
                continue                  # a copy of a tree's root: no wait sees it
            if want > 0 and procfs.ns_pid(child) != want:
                continue
            return True
    return False


class Scheduler(Tasks):
    """A node's processes and threads (tasks.py) and the loop that runs them: what a
    node holds as `Node.tasks`."""

    def run(self, outcome) -> None:
        """Answer a held call (`outcome`: (thread, result), or None) and run the
        node, one thread at a time, until no thread can run: each is held in a call
        that cannot complete yet, natively blocked or gone (the node is quiescent),
        or the process has exited."""
        # The watchdog is real time per step: a node that keeps making calls that
        # complete at once (a busy loop of EAGAINs) is caught as well as a silent one.
        self._deadline = time.monotonic() + self.node.setting.watchdog_s
        self._starving = None                # (CPU seconds, extensions) at the deadline
        self.node.own()                      # a process lent to other worlds is forked first
        try:
            while self.alive and (outcome is None or self._resume(*outcome)):
                self._last = outcome[0] if outcome is not None else None
                if not self._gather():
                    return
                outcome = self._runnable(self._last)
                if outcome is None:
                    return
        finally:
            if self.groups or self.pgid != self.pid:
                self.prune_groups()          # quiescent or gone: no empty group is kept

    def _resume(self, thread: Thread, result) -> bool:
        """Answer thread's held call: it runs. False: the process is gone."""
        notif = thread.notif
        thread.notif = thread.block = thread.kept = None
        thread.yielded = 0
        if result is ANSWERED or self._answer(notif, result):
            return True
        pidfd = thread.proc.pidfd     # ended, or its call was taken back (a signal): not a hang
        if pidfd >= 0 and not select.select([pidfd], [], [], self.node.setting.watchdog_s)[0]:
            raise EngineError(self.node.where() + f"thread {thread.index}: its "
                              f"{NAME.get(notif.nr, notif.nr)} call was taken back before cmc "
                              "answered it, and its process did not end")
        return self._gone(thread.proc)

    def _gather(self) -> bool:
        """Wait until no thread of the node is running: each is held (cmc has its
        next call), natively blocked or gone, as the kernel shows them. A node of
        one thread simply waits for its next call. False: the process exited."""
        rounds = 0
        while True:
            if not self.alive:
                return False
            # Not held: each is looked at in the kernel, but for a parent asleep in
            # wait4 when no process of the node has ended since it was seen there:
            # only a child's end wakes it (a shell over the program it runs).
            loose = [t for t in self.threads.values() if t.notif is None and not self._parked(t)]
            ends = self.ends
            creating = self.clones or self.forking is not None
            if not loose and not creating:
                if self._stirred():      # a parked waiter may be awake: look at it
                    continue
                if self.next_proc > 1 and self._interrupt():
                    continue
                return True
            # One thread in all that is neither held nor parked: wait for its next call
            # (or its end); else look at the kernel between short waits.
            single = not creating and len(loose) == 1 and all(
                t.notif is None for t in self.threads.values())
            # the thread answered last, running alone, goes on while its calls complete
            # (_runnable): some of them are answered in C on the way (Node.alone); not in
            # a process tree, where a held call may be interrupted (_interrupt) then
            alone = loose[0] if len(loose) == 1 and not creating and loose[0] is self._last \
                and self.next_proc == 1 else None
            notif = self._next_notification(None if single else min(1 << rounds, 4) - 1, alone)
            if notif is False:
                return False
            if notif is not None:
                self._arrive(notif)
                continue
            if self.ends != ends:
                continue                 # a process ended: who is loose is to be seen again
            rounds += 1
            if not self._settled(loose):
                continue
            # A thread seen asleep may be asleep in a notified call whose notification
            # the kernel queued before it slept: look once more, after.
            notif = self._next_notification(0)
            if notif is False:
                return False
            if notif is None and self.ends != ends:
                continue
            if notif is None:
                if self.next_proc > 1 and self._interrupt():
                    continue
                return True
            self._arrive(notif)

    _last = None

    def _alone(self, thread):
        """What recv needs to answer some calls of `thread` itself (or NULL): when it is
        the one thread of the node that runs, the others held in calls or asleep, its
        clock reads and its signal mask and stack calls would be answered at once and
        it would go on anyway (`_runnable`: the thread that ran last goes on); not under
        time virtual, where reading the clock moves it (polls), nor while the calls are
        recorded (docs/design.md, "Calls of the one running thread answered in C")."""
        setting = self.node.setting
        if thread is None or setting.virtual or setting.recording:
            return _native.ffi.NULL
        e = self.node.elapsed_ns             # now_ns() under time async
        return _native.alone(thread.tid, REALTIME_START_NS + e, MONOTONIC_START_NS + e, e)

    # -- a run stopped by `pausing` (a start kept: zygote.py; a FIRE tried for folding)
    def last_answered(self) -> int | None:
        """The index of the thread a paused run answered last."""
        return self._last.index if self._last is not None else None

    def go_on(self, index: int | None) -> None:
        """Go on with a run stopped by `pausing` as if it had not stopped: the same
        choice of the next thread (`_runnable`) from the thread answered last (`index`)."""
        last = next((t for t in self.threads.values() if t.index == index), None)
        outcome = self._runnable(last)
        if outcome is not None:
            self.run(outcome)

    def _settled(self, loose: list[Thread]) -> bool:
        """Look at the threads not held, in the kernel: find the new one (after a
        clone), forget those gone; True when none is running."""
        if self.clones:
            parent = self.threads.get(self.clone_parent)
            proc = parent.proc if parent is not None else self.main
            new = [tid for tid in task_ids(proc.pid) if tid not in self.threads] \
                if proc is not None else []
            for tid in new:
                loose.append(self._add_thread(tid, proc))
            if not new and (parent is None or parent.notif is not None):
                self.clones = 0          # the clone failed: no thread came of it
        if self.forking is not None:
            proc, tid = self.forking
            # (not a copy of the tree made from this process: no exit signal, fork.py)
            new = [pid for pid in task_children(proc.pid, tid)
                   if pid not in self.procs and procfs.exit_signal(pid) != 0]
            for pid in new[:1]:
                loose.append(self._add_process(pid, proc))
            parent = self.threads.get(tid)
            past = not new and (parent is None or parent.notif is not None
                                or _past_fork(proc.pid, tid))
            if past:
                orphan = self._orphan()     # the parent is ending: cmc adopted the child
                if orphan is not None:
                    loose.append(self._add_process(orphan, proc))
            if self.forking is not None and past:
                # it failed, or the child is gone already (it exited without a call
                # cmc sees): counted as a process that came and went, as if seen, so
                # that the world does not depend on how soon the child ended
                self.forking = None
                self.next_proc += 1
                self.next_thread += 1
        running = False
        for t in loose:
            if t.tid not in self.threads:
                continue                 # its process is gone
            state, nr = task_state(t.proc.pid, t.tid)
            if state in "XZ":
                self._thread_gone(t)
            elif state == "D" and t.proc.vforked and nr in VFORKS:
                t.native = nr            # a vfork's parent: until its child execs or exits
            elif t.exiting or state != "S" or nr not in NATIVE_WAITS \
                    or nr in WAITS_FOR_CHILD and _child_to_reap(t, nr):
                t.native = None
                running = True
            else:
                t.native, t.native_at = nr, self.ends + self.stirs
        settled = not running and not self.clones and self.forking is None
        # every sender has made its kill: a waiter parked before it may be awake
        return settled and not self._stirred()

    def _stirred(self) -> bool:
        """A kill of the node's was answered since parked threads were last looked at:
        unpark them (True), so that the next round looks at them in the kernel."""
        if not self.signalled:
            return False
        self.signalled = False
        self.stirs += 1
        return True

    def _parked(self, t: Thread) -> bool:
        return t.native in WAITS_FOR_CHILD and t.native_at == self.ends + self.stirs

    def _arrive(self, notif) -> None:
        t = self.threads.get(notif.pid) or self._new_task(notif.pid)
        t.notif, t.block, t.native, t.kept = notif, None, None, None

    def _runnable(self, last: Thread | None = None):
        """The next thread to run and the answer to its call, or None. The thread
        that ran last (`last`) goes on while its calls complete: threads switch only
        when the running one blocks (so a thread that wakes another and then waits
        itself is queued first, as on a kernel that does not preempt it). Then, in
        creation order, the first whose call (dispatched now if it just arrived)
        completes; a thread that gave way (sched_yield) only when no other can run,
        the one that gave way first, first."""
        if self.paused is not None:
            return None                  # a FIRE being tried met a visible call
        if (last is not None and self.threads.get(last.tid) is last and last.notif is not None
                and last.block is None and not last.yielded):
            result = self._dispatch(last)
            if result is None:
                return None
            if not isinstance(result, Block):
                return last, result
        held = [t for t in self.threads.values() if t.notif is not None]
        for t in held:
            if t.block is None:
                result = self._dispatch(t)
                if result is None:
                    return None
                if not isinstance(result, Block):
                    return t, result
            if t.yielded:
                continue
            done = t.block.attempt()
            if done is None and t.block.timeout_ns == 0:
                done = t.block.on_fire()
            if done is not None:
                if t.block.waiter is not None and t.block.waiter.woken:
                    return self._first_woken(held)
                return t, done
        gave_way = [t for t in held if t.yielded]
        if gave_way:
            t = min(gave_way, key=lambda t: t.yielded)
            return t, t.block.attempt()
        return None

    @staticmethod
    def _first_woken(held):
        """Of the threads a futex wake let go, the one woken first: waiters that one
        broadcast woke run in the order they waited, as the kernel's queue hands
        them the lock (not in thread order, which would make the order of what they
        do next depend on which thread took which job: --check-merges, demo/tlog)."""
        woken = [t for t in held if t.block is not None and not t.yielded
                 and t.block.waiter is not None and t.block.waiter.woken]
        t = min(woken, key=lambda t: t.block.waiter.woken)
        return t, t.block.attempt()

    def _answer(self, notif, result) -> bool:
        if self.node.setting.recording:
            self.node.setting.log_call(self.node, render(notif.nr, notif.args, result,
                                                         getattr(result, "moved", None)))
        if result is CONTINUE:
            return _native.respond(self.listener, notif.id, cont=True)
        if isinstance(result, Err):
            return _native.respond(self.listener, notif.id, err=result.errno)
        return _native.respond(self.listener, notif.id, val=result.val)

    def _dispatch(self, t: Thread):
        """Dispatch thread t's held call: its answer, or the Block it now waits in (kept
        as t.block, with the clock it blocked at). None: a FIRE tried for folding
        (`pausing`, time virtual) met a call that shows (calls/quiet.py) and stopped
        before answering it; the world is spoilt and its owner throws it away."""
        if self.pausing is not None and self.pausing(t):
            self.paused = t
            return None
        result = dispatch(t.proc, t.notif)
        if isinstance(result, Block):
            t.block = result
            result.since = self.node.now_ns()
        return result

    def try_wake(self) -> bool:
        """Run a held thread whose call the world now lets complete, and on."""
        if not self.alive or not any(t.block is not None for t in self.threads.values()):
            return False
        outcome = self._runnable()
        if outcome is None:
            return False
        self.run(outcome)
        return True

    def fire(self, tag: int = 0) -> None:
        """The timeout of the blocked call of the thread with `tag` (Thread.tag) expires."""
        t = next(t for t in self.threads.values() if t.tag == tag)
        if not self.node.setting.virtual:     # else the cluster moved its clock
            self.node.elapsed_ns += t.block.timeout_ns
        self.run((t, t.block.on_fire()))

    def _next_notification(self, timeout_ms: int | None = None, alone: Thread | None = None):
        """The next notification of this node (any thread of any of its processes);
        None when `timeout_ms` passes first or a process of it ended; False when
        the node has no process left. Some calls of thread `alone`, the one thread
        that runs, are answered on the way (Node.alone)."""
        tap = self.tap
        for tid in list(tap.stash):
            if self._mine(tid):
                return tap.stash.pop(tid)
        while True:
            left = self._deadline - time.monotonic()
            wait = max(int(left * 1000), 0) if left > 0 else 0
            if timeout_ms is not None:
                wait = min(wait, timeout_ms)
            events = dict(self._poller.poll(wait))
            if not events:
                if left > 0 and timeout_ms is not None:
                    return None
                if time.monotonic() < self._deadline:
                    continue
                if self._starved():
                    self._deadline = time.monotonic() + self.node.setting.watchdog_s
                    continue
                raise TargetError(self.node.where() + self._stuck() +
                                  f" for {self.node.setting.watchdog_s:g} s without blocking in an "
                                  "emulated call (watchdog; raise it with --watchdog)")
            if events.get(self.listener, 0) & select.POLLIN:
                try:
                    notif = _native.recv(self.listener, self._alone(alone))
                except OSError:
                    notif = None
                if notif is not None:
                    if self._mine(notif.pid):
                        COUNTERS["notifications"] += 1
                        return notif
                    tap.stash[notif.pid] = notif       # a copy's; not this node's
                continue
            ended = [p for p in self.procs.values() if p.pidfd in events]
            if not ended and events.get(self.listener, 0) & select.POLLHUP:
                ended = list(self.procs.values())     # every process on the filter is gone
            if not ended:
                continue
            for proc in ended:
                if not self._gone(proc):
                    return False
            return None

    def _gone(self, proc: Process) -> bool:
        """Process proc has ended (or is ending: an answer found it gone). The end
        of the launched process is judged as a program's end (docs/target-contract.md,
        "Process trees"); another's is its parent's business (wait4 and SIGCHLD are
        native): cmc reaps it if it came to cmc as an orphan. False: no process left."""
        self.ends += 1
        # a child forked and not seen yet is cmc's now: it keeps the listener open
        orphan = self._orphan() if self.forking is not None and self.forking[0] is proc \
            else None
        if orphan is not None:
            self.tap.pids.add(orphan)
        if proc.pid == self.pid:
            if self.ns_root and self.root_known and len(self.procs) > 1:
                # the root of a copied tree is process 1 of its PID namespace: the
                # kernel ended the others with it, where the original's go on
                raise NotForkable(f"node {self.node.name}: the first process of a copied "
                                  "process tree ended before the others")
            status = end_status(self.pid, wait=True)
            if status is None:
                status = signal.SIGKILL
            self.pid = 0
            self.forget(proc)
            close_all(proc)
            if os.WIFSIGNALED(status):
                self.kill()               # the rest of its tree goes with it
                sig = signal.Signals(os.WTERMSIG(status)).name
                fault = f" ({proc.fault})" if proc.fault and sig == "SIGSEGV" else ""
                raise TargetError(self.node.where() +
                                  f"died of signal {sig} outside a CRASH action{fault}")
            code = os.WEXITSTATUS(status)
            if code != 0:
                self.kill()
                raise TargetError(self.node.where() +
                                  f"exited with status {code} outside a CRASH action" +
                                  self.node.setting.stderr_tail(self.node))
        else:
            self.forget(proc)
            close_all(proc)
            self.reapable.append(proc.pid)
        self.reaped_since()
        if orphan is not None and self.forking is not None:
            self._add_process(orphan, proc)    # after the parent's threads are forgotten
        if self.procs:
            return True
        self.detach()
        self.node.net.collect()           # every process of it ended by itself
        return False

    def _orphan(self) -> int | None:
        """The process a parent forked just before it ended, before cmc saw the
        child's first call (a daemon's first fork): cmc's child now (the subreaper's),
        still in a group of the node, as it has made no call to leave it (setsid is
        notified). None when there is none (it ended too)."""
        groups = {self.pgid, *self.groups}
        for pid in procfs.orphans():
            if pid in self.procs or pid in self.reapable:
                continue
            try:
                st = procfs.status(pid)
                if os.getpgid(pid) in groups and not st.get("State", "Z").startswith("Z"):
                    return pid
            except OSError:
                continue
        return None

    def _interrupt(self) -> bool:
        """A caught signal is pending for a thread held in a blocked call (SIGCHLD
        of a child that ended, a signal one process of the node sent another): end
        the call as Linux does -- with EINTR, or restarted under SA_RESTART for a
        call Linux restarts (the kernel decides, from ERESTARTSYS; poll, select,
        epoll_wait, sleeps and calls with a timeout get ERESTARTNOHAND: EINTR when
        a handler runs). True when one was."""
        for t in list(self.threads.values()):
            if t.block is None or t.notif is None:
                continue
            st = procfs.status(t.tid)
            if not st:
                continue
            try:
                pending = (int(st["SigPnd"], 16) | int(st["ShdPnd"], 16)) \
                    & ~int(st["SigBlk"], 16) & int(st["SigCgt"], 16)
            except (KeyError, ValueError):
                continue
            if not pending:
                continue
            block = t.block
            if block.cancel is not None:
                block.cancel()
            code = ERESTARTNOHAND if (block.timeout_ns is not None or block.what in NO_RESTART) \
                else ERESTARTSYS
            self._resume(t, Err(code))
            return True
        return False

    def blocked_calls(self):
        """The node's blocked calls, for the fingerprint: (call, timeout) for a node
        of one thread; else, per thread in creation order, (index, call, timeout),
        or (index, the native call it sleeps in) or (index, None: running); the
        index is (process index, thread index) in a node that has had processes."""
        if len(self.threads) == 1 and self.next_thread == 1:
            t = next(iter(self.threads.values()))
            return (t.block.what, self._timeout(t.block)) if t.block is not None else None
        out = []
        for t in self.threads.values():
            who = (t.proc.number, t.index) if self.next_proc > 1 else t.index
            if t.block is not None:
                out.append((who, t.block.what, self._timeout(t.block)) + _blocked_on(t))
            else:
                out.append((who, NAME.get(t.native) if t.native is not None else None))
        return tuple(out)

    def _timeout(self, block) -> int | None:
        """What the fingerprint holds of a wait's timeout: the timeout itself (time
        async), or the time left to its deadline (time virtual), never the clock."""
        if block.timeout_ns is None or not self.node.setting.virtual:
            return block.timeout_ns
        return block.since + block.timeout_ns - self.node.net.clock

    def _starved(self) -> bool:
        """At the watchdog's deadline: whether the threads running are waiting for a CPU
        (runnable, or in a short uninterruptible wait) rather than running, as on a
        loaded machine: they used less than half the time in CPU since the deadline
        before. The watchdog then waits once more, five times at most. A thread asleep
        in a call cmc does not know is not starved: that stops the run as before."""
        running = [t for t in self.threads.values() if t.notif is None]
        seen = [task_cpu(t.proc.pid, t.tid) for t in running]
        if not any(state in "RD" for state, _ in seen):
            return False
        cpu = sum(used for _, used in seen)
        before, extended = self._starving or (None, 0)
        self._starving = (cpu, extended + 1)
        if extended >= 5:
            return False
        return before is None or cpu - before < self.node.setting.watchdog_s / 2

    def _stuck(self) -> str:
        """Who kept running, for the watchdog's message."""
        if len(self.threads) <= 1 and self.next_proc <= 1:
            return "ran"
        loose = [t for t in self.threads.values() if t.notif is None]
        shown = []
        for t in loose:
            _, nr = task_state(t.proc.pid, t.tid)
            shown.append(self.who(t) + (f" (in {NAME.get(nr, nr)})" if nr is not None else ""))
        if self.forking is not None:
            shown.append(f"the child process {self.who(self.forking[0])} forked, not seen")
        return ", ".join(shown) + (" ran" if len(shown) == 1 else " were running")

    def fire_names(self, t: Thread, several: bool) -> dict:
        """How a FIRE of thread t names it (by creation order): not at all when it is
        the node's only timed wait; else its process, in a node that has had more
        than one, and its thread, where its process has more than one."""
        if not several:
            return {}
        if self.next_proc <= 1:
            return {"thread": t.index}
        return {"process": t.proc.number,
                "thread": t.index if self._threaded(t.proc) else None}

    def who(self, t) -> str:
        """A thread (or a process) as messages name it: by creation order."""
        if isinstance(t, Process):
            return f"process {t.number}"
        if self.next_proc > 1:
            return f"process {t.proc.number}" + (f" thread {t.index}"
                                                 if self._threaded(t.proc) else "")
        return f"thread {t.index}"

    def _threaded(self, proc: Process) -> bool:
        """Whether process proc has more than one thread now."""
        return sum(1 for u in self.threads.values() if u.proc is proc) > 1


def _blocked_on(t: Thread) -> tuple:
    """What a thread's held call waits on: for a futex wait, its place in the
    queue; for a call on a virtual socket of a connection or a listener, that
    connection's or listener's address, so that two worlds in which threads wait on
    the same sockets the other way round (one thread per connection, connections
    accepted in another order) are two worlds, not one (--check-merges found it in
    demo/tlog). Empty otherwise."""
    if t.block is not None and t.block.waiter is not None:
        # Which word a futex waiter waits on (named by its rank among the words
        # waited on, not by its address, which --det's shifted stack would move)
        # and its place among that word's waiters (a wake takes the first): two
        # worlds that differ in either are two worlds (--check-merges, demo/tlog).
        w = t.block.waiter
        waiters = t.block.queue.waiters
        words = sorted({x.addr for x in waiters})
        same = [x for x in waiters if x.addr == w.addr]
        return next((("queued", words.index(w.addr), i) for i, x in enumerate(same)
                     if x is w), ())
    notif = t.notif
    if notif is None or notif.nr not in _ON_FD:
        return ()
    sock = t.proc.fds.get(fd_arg(notif.args[0]))
    if sock is None or not hasattr(sock, "conn"):
        return ()
    if sock.conn is not None:
        return (sock.conn.key(),)
    return (fmt_addr(sock.local),) if sock.listening and sock.local is not None else ()


_ON_FD = nrs(lambda row: row.on_socket)
