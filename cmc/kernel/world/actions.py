"""The environment's actions as the kernel states them: a record of fields (what
a report shows) from which the label is rendered, and the key that identifies the
action in its world (what a trace stores)."""
from __future__ import annotations

from dataclasses import dataclass

from .net import DATA, Msg, quote


def describe_key(key: tuple) -> str:
    """An action key in words, for when its label cannot be computed."""
    kind, rest = key[0], key[1:]
    if kind in ("FIRE", "CRASH"):
        return f"{kind} node {rest[0]}"
    if rest and isinstance(rest[0], tuple):
        owner, src, dst = rest[0][:3]
        return f"{kind} {owner}@{src} -> {dst}"
    return " ".join(str(k) for k in key)


@dataclass(frozen=True)
class Action:
    """An enabled environment action: its key (what identifies it in its world, and
    what a trace stores) and what it does, as fields; its label is rendered from
    them. A message's action names its channel (src -> dst) and the message: msg is
    DATA (then data is its bytes) or a control message (CONNECT, FIN, RST); None is
    the whole channel (a FIFO drop resets the connection). FIRE and CRASH name a
    node; a FIRE also the blocked call it wakes and its timeout."""
    key: tuple
    kind: str                   # DELIVER, DROP, DUP, FIRE or CRASH
    src: str = ""
    dst: str = ""
    msg: str | None = None
    data: bytes | None = None
    node: str = ""
    call: str = ""
    timeout_ns: int = 0
    thread: int | None = None   # a FIRE's thread, when its node has more than one timed wait
    process: int | None = None  # ... and its process, when the node has had more than one
    reached: int | None = None  # a CRASH under fsync partial: how many unsynced writes
    unsynced: int = 0           # ... of how many reached disk

    @property
    def label(self) -> str:
        if self.kind == "FIRE":
            thread = f" thread {self.thread}" if self.thread is not None else ""
            if self.process is not None:
                thread = f" process {self.process}{thread}"
            return f"FIRE {self.node}{thread} {self.call} {self.timeout_ns / 1e9:g}s"
        if self.kind == "CRASH":
            if self.reached is not None:
                return (f"CRASH {self.node} ({self.reached} of {self.unsynced} unsynced "
                        "writes reached disk)")
            return f"CRASH {self.node}"
        text = f"{self.kind} {self.src} -> {self.dst}"
        if self.msg is None:
            return text
        return f"{text} {quote(self.data) if self.msg == DATA else self.msg}"

    def fields(self) -> dict:
        """What a report shows of the action (its bytes as text: UTF-8, invalid
        sequences replaced, as the world's `network` shows them)."""
        if self.kind == "FIRE":
            out = {"kind": self.kind, "node": self.node,
                   "what": f"{self.call} {self.timeout_ns / 1e9:g}s"}
            if self.process is not None:
                out["process"] = self.process
            if self.thread is not None:
                out["thread"] = self.thread
            return out
        if self.kind == "CRASH":
            if self.reached is not None:
                return {"kind": self.kind, "node": self.node, "reached": self.reached,
                        "unsynced": self.unsynced}
            return {"kind": self.kind, "node": self.node}
        data = self.msg if self.msg != DATA else self.data.decode("utf-8", "replace")
        return {"kind": self.kind, "src": self.src, "dst": self.dst, "data": data,
                "msg": self.msg}


def message_action(kind: str, key: tuple, src: str, dst: str, m: Msg) -> Action:
    return Action(key, kind, src, dst, m.kind, m.data if m.kind == DATA else None)
