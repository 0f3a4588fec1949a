"""The environment's actions, one small type per kind: a record of fields (what a
report shows), the label rendered from them, and the key that identifies the action
in its world (what a trace stores and the engine compares; its shape is the trace
file's, docs/report.md).

- `MessageAction`: DELIVER, DROP (in a bag) or DUP of one message on a channel;
- `ResetChannel`: a DROP in a FIFO network, which loses the channel and resets the
  connection;
- `DatagramAction`: DELIVER, DROP or DUP of a UDP datagram (one of its kind);
- `Fire`: a blocked call's timeout expires;
- `Crash`: a node loses its processes and what its disk had not made durable.
"""
from __future__ import annotations

from dataclasses import dataclass

from .net import DATA, quote


def describe_key(key: tuple) -> str:
    """An action key in words, for when its label cannot be computed."""
    kind, rest = key[0], key[1:]
    if kind in ("FIRE", "CRASH"):
        return f"{kind} node {rest[0]}"
    if rest and isinstance(rest[0], tuple):
        owner, src, dst = rest[0][:3]
        return f"{kind} {owner}@{src} -> {dst}"
    return " ".join(str(k) for k in key)


def duration(ns: int) -> str:
    """A duration as a person writes it: 50ms, 20us, 2s, 1.5ms."""
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= size:
            return f"{ns / size:g}{unit}"
    return f"{ns}ns"


def _channel_label(kind: str, src: str, dst: str, msg: str | None, data: bytes | None) -> str:
    text = f"{kind} {src} -> {dst}"
    if msg is None:
        return text
    return f"{text} {quote(data) if msg == DATA else msg}"


def _channel_fields(kind: str, src: str, dst: str, msg: str | None, data: bytes | None) -> dict:
    """A channel action's record (its bytes as text: UTF-8, invalid sequences
    replaced, as the world's `network` shows them)."""
    shown = msg if msg != DATA else data.decode("utf-8", "replace")
    return {"kind": kind, "src": src, "dst": dst, "data": shown, "msg": msg}


@dataclass(frozen=True)
class MessageAction:
    """DELIVER, DROP or DUP of the message at `index` of a connection's channel
    (`side` 0: connector to acceptor), from src to dst: a control message (`msg`
    CONNECT, FIN, RST) or DATA with its bytes."""
    kind: str                   # DELIVER, DROP or DUP
    conn: tuple                 # the connection's key in its world (Network.keyed)
    side: int
    index: int
    src: str
    dst: str
    msg: str
    data: bytes | None = None

    @property
    def key(self) -> tuple:
        return (self.kind, self.conn, self.side, self.index)

    @property
    def label(self) -> str:
        return _channel_label(self.kind, self.src, self.dst, self.msg, self.data)

    def fields(self) -> dict:
        return _channel_fields(self.kind, self.src, self.dst, self.msg, self.data)


@dataclass(frozen=True)
class ResetChannel:
    """A DROP in a FIFO network: the channel is lost and the connection reset."""
    conn: tuple
    src: str
    dst: str
    kind = "DROP"

    @property
    def key(self) -> tuple:
        return ("DROP", self.conn)

    @property
    def label(self) -> str:
        return _channel_label(self.kind, self.src, self.dst, None, None)

    def fields(self) -> dict:
        return _channel_fields(self.kind, self.src, self.dst, None, None)


@dataclass(frozen=True)
class DatagramAction:
    """DELIVER, DROP or DUP of one datagram of a group (datagrams alike in source,
    destination and bytes are one group: which of them is taken makes no difference)."""
    kind: str                   # DELIVER, DROP or DUP
    group: tuple                # Datagram.group()
    src: str
    dst: str
    data: bytes

    @property
    def key(self) -> tuple:
        return (f"{self.kind}_DGRAM", self.group)

    @property
    def label(self) -> str:
        return _channel_label(self.kind, self.src, self.dst, DATA, self.data)

    def fields(self) -> dict:
        return _channel_fields(self.kind, self.src, self.dst, DATA, self.data)


@dataclass(frozen=True)
class Fire:
    """The timeout of a blocked call of node `node` (index; `name`) expires: the call
    `call`, waiting `timeout_ns`, of its thread `thread_index` (Thread.tag: the
    thread's index in its process, 0 the first, and the process's number above bit 16). `thread` and `process` are how the label names that thread: only when
    the node has more than one timed wait (and its process, when it has had more
    than one)."""
    node: int
    name: str
    call: str
    timeout_ns: int
    thread_index: int = 0
    thread: int | None = None
    process: int | None = None
    at: int | None = None       # time virtual: the clock it fires at (its deadline)
    late: int = 0               # ... and how many messages it delays past their bound
    kind = "FIRE"

    @property
    def key(self) -> tuple:
        return ("FIRE", self.node) + ((self.thread_index,) if self.thread_index else ())

    @property
    def label(self) -> str:
        thread = f" thread {self.thread}" if self.thread is not None else ""
        if self.process is not None:
            thread = f" process {self.process}{thread}"
        if self.at is not None:
            return (f"FIRE {self.name}{thread} {self.call} {duration(self.timeout_ns)} "
                    f"@ {self.at / 1e9:.3f}s")
        return f"FIRE {self.name}{thread} {self.call} {self.timeout_ns / 1e9:g}s"

    def fields(self) -> dict:
        out = {"kind": self.kind, "node": self.name,
               "what": f"{self.call} {self.timeout_ns / 1e9:g}s"}
        if self.at is not None:
            out["at_ns"] = self.at
        if self.process is not None:
            out["process"] = self.process
        if self.thread is not None:
            out["thread"] = self.thread
        return out


@dataclass(frozen=True)
class Crash:
    """Node `node` (index; `name`) crashes; under fsync partial, `reached` of its
    `unsynced` writes reached disk."""
    node: int
    name: str
    reached: int | None = None
    unsynced: int = 0
    kind = "CRASH"

    @property
    def key(self) -> tuple:
        return ("CRASH", self.node) + ((self.reached,) if self.reached is not None else ())

    @property
    def label(self) -> str:
        if self.reached is not None:
            return (f"CRASH {self.name} ({self.reached} of {self.unsynced} unsynced "
                    "writes reached disk)")
        return f"CRASH {self.name}"

    def fields(self) -> dict:
        if self.reached is not None:
            return {"kind": self.kind, "node": self.name, "reached": self.reached,
                    "unsynced": self.unsynced}
        return {"kind": self.kind, "node": self.name}


@dataclass(frozen=True)
class ClientStart:
    """Time virtual: the clock reaches `at`, when ghost client `client` connects and
    sends its first request (`client NAME after T`)."""
    client: str
    at: int
    kind = "FIRE"

    @property
    def key(self) -> tuple:
        return ("FIRE", self.client)

    @property
    def label(self) -> str:
        return f"FIRE client {self.client} starts @ {self.at / 1e9:.3f}s"

    def fields(self) -> dict:
        return {"kind": self.kind, "node": self.client, "what": "starts", "at_ns": self.at}


Action = MessageAction | ResetChannel | DatagramAction | Fire | ClientStart | Crash
