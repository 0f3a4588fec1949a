"""Ctrl-C and SIGTERM, held while cmc does what must not be cut in half.

Both end a run by raising KeyboardInterrupt wherever Python is (cli.py installs
SIGTERM's handler). A few short sections must run whole or the run leaves something
behind: making a scratch directory and putting it on the list of what to remove;
starting a node process and recording its pid (an interrupt between the two would
lose the process, which then writes into a directory being removed); and the
cleanup itself, which a second Ctrl-C would otherwise cut short. Inside
`interrupts_held` the two signals stay pending; they are raised when it ends.
"""
from __future__ import annotations

import contextlib
import signal

INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C and SIGTERM wait, pending, until the block ends (then they are raised
    as usual)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def hold_interrupts() -> set:
    """Hold Ctrl-C and SIGTERM from now on; returns the signal mask to restore."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)


def drop_interrupts(old: set | None) -> None:
    """Discard the Ctrl-C and SIGTERM held since `hold_interrupts` (they asked to
    end a run that is ending) and restore the mask `old` (None: an interrupt came
    before they were held; the mask was the usual one)."""
    if old is None:
        old = hold_interrupts()
    while signal.sigtimedwait(INTERRUPTS, 0) is not None:
        pass
    signal.pthread_sigmask(signal.SIG_SETMASK, old)
