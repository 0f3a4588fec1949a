"""What a call handler answers a notified call with: a value (Ret), an error (Err),
"run it natively" (CONTINUE), "already answered" (ANSWERED, e.g. by placing a
descriptor with ADDFD and SEND), or a Block: the call waits for the environment."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Ret:
    val: int
    # the bytes the call moved (sent, received, written to fd 3 or 193): shown by the
    # call log of a replay (calllog.py), never compared
    moved: bytes | None = field(default=None, compare=False, repr=False)


@dataclass
class Err:
    errno: int


CONTINUE = object()   # let the call run natively
ANSWERED = object()   # the handler has answered the notification itself


@dataclass
class Block:
    """A call that cannot complete yet. `attempt` completes it when the world
    allows (returns Ret/Err, doing its side effects) or returns None;
    `timeout_ns` (finite) enables a FIRE, which `on_fire` answers; `cancel`
    undoes what waiting registered when a signal ends the call instead."""
    attempt: Callable[[], object]
    timeout_ns: int | None = None
    on_fire: Callable[[], object] | None = None
    what: str = ""
    cancel: Callable[[], None] | None = None   # undo what waiting did (a signal ended it)
    # A futex wait: its place in the queue (threads.Futexes), which decides which
    # waiter a wake takes and the order woken waiters run in.
    waiter: object = None
    queue: object = None
    # time virtual: the clock when the call blocked; its deadline is since + timeout_ns
    since: int = 0
