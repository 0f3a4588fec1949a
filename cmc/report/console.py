"""The live progress display on a terminal (docs/report.md, "The live display"), and
the choice of reporter.

On a terminal, `LiveReporter` prints TLC's lines as `TlcReporter` does and, while
the search runs, keeps a few lines at the bottom of the screen with the counts as
they change: distinct states, states generated, the queue, the depth, states per
second. Off a terminal (CI, a pipe, a file) `make_reporter` gives the plain
`TlcReporter`, whose `Progress(D) at …` lines come every 60 s.

How it stays out of the way:
- The engine calls `progress(stats)` as often as it likes (every state); that only
  takes a snapshot of four integers. rich's `Live` redraws the display from its own
  thread at most `REFRESH_PER_SECOND` times a second, so a fast search is not
  slowed by drawing and the terminal is not flooded.
- A line said while the display is up goes through the display's Console, which
  prints it above the display: the two never garble each other.
- `finish`, `replayed` and `close` stop the display first; it is transient, so
  stopping erases it. What the terminal keeps is then exactly what `TlcReporter`
  prints: TLC's lines, nothing of the display. The live display replaces TLC's
  60 s progress lines (docs/cmc.md, "Output"), so those are not printed here.
"""
from __future__ import annotations

import collections
import os
import sys
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .tlc import TlcReporter, duration, machine_lines

REFRESH_PER_SECOND = 4      # often enough to look alive, rarely enough to cost nothing
RATE_WINDOW = 5.0           # seconds of history the states/s figure averages over


def make_reporter(stream=None) -> TlcReporter:
    """The reporter for `stream` (default: sys.stdout): a LiveReporter when it is a
    terminal (and TERM is not "dumb"), else the plain TlcReporter (CI). check.py's
    `make_reporter()` is `return make_reporter(sys.stdout)`."""
    stream = stream or sys.stdout
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty() and os.environ.get("TERM") != "dumb":
        return LiveReporter(stream)
    return TlcReporter(stream)


class LiveReporter(TlcReporter):
    """TlcReporter's lines plus a live display of the search's counts (a terminal only)."""

    def __init__(self, out=None):
        super().__init__(out or sys.stdout)
        self.console = Console(file=self.out, highlight=False, markup=False, emoji=False,
                               soft_wrap=True)
        self.live: Live | None = None
        self.snapshot = (0, 0, 0, 0, 0)     # generated, distinct, queue, depth, walks
        self.machines: list[str] = []       # --ray: a line per machine
        self.samples: collections.deque = collections.deque()

    def say(self, line: str = "") -> None:
        if self.live is None:
            super().say(line)
        else:
            self.console.print(line, markup=False, highlight=False, emoji=False,
                               soft_wrap=True)

    def initial(self, stats) -> None:
        super().initial(stats)
        self.progress(stats)
        self.live = Live(get_renderable=self.display, console=self.console,
                         refresh_per_second=REFRESH_PER_SECOND, transient=True,
                         redirect_stdout=self.out is sys.stdout,
                         redirect_stderr=self.out is sys.stdout)
        self.live.start()

    def progress(self, stats, force: bool = False) -> None:
        self.snapshot = (stats.generated, stats.distinct, stats.queue, stats.depth,
                         getattr(stats, "walks", 0))
        self.machines = machine_lines(stats)
        now = time.time()
        if not self.samples or now - self.samples[-1][0] >= 0.2:
            self.samples.append((now, stats.generated))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW:
            self.samples.popleft()

    def rate(self) -> str:
        """States generated per second, over the last RATE_WINDOW seconds ("-" in the
        first half second, when a count over a few milliseconds would mean nothing)."""
        if len(self.samples) >= 2:
            (t0, g0), (t1, g1) = self.samples[0], self.samples[-1]
            return f"{(g1 - g0) / (t1 - t0):,.0f}"
        elapsed = time.time() - self.started
        return f"{self.snapshot[0] / elapsed:,.0f}" if elapsed >= 0.5 else "-"

    def display(self) -> Group:
        generated, distinct, queue, depth, walks = self.snapshot
        table = Table.grid(padding=(0, 3))
        if self.simulation:
            heads = ("walks", "states checked", "states/s", "elapsed")
            cells = (f"{walks:,}", f"{generated:,}", self.rate(),
                     duration(time.time() - self.started))
        else:
            heads = ("distinct states", "states generated", "on queue", "depth",
                     "states/s", "elapsed")
            cells = (f"{distinct:,}", f"{generated:,}", f"{queue:,}", str(depth),
                     self.rate(), duration(time.time() - self.started))
        for _ in heads:
            table.add_column(justify="right")
        table.add_row(*(Text(h, style="dim") for h in heads))
        table.add_row(*(Text(c, style="bold") for c in cells))
        title = "Simulating" if self.simulation else "Model checking"
        return Group(Text(f"{title}…", style="cyan"), table,
                     *(Text(line, style="dim") for line in self.machines))

    def close(self) -> None:
        """Stop and erase the display (idempotent); what follows is plain text."""
        if self.live is not None:
            live, self.live = self.live, None
            live.stop()

    def finish(self, *args, **kwargs) -> None:
        self.close()
        super().finish(*args, **kwargs)

    def replayed(self, *args, **kwargs) -> None:
        self.close()
        super().replayed(*args, **kwargs)
