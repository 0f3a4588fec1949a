"""`peers NODE: A, B` lines (docs/model-file.md, "`peers`"): the nodes a node may reach,
checked at every step (Setting.check_peer, from the connect and send calls and the
deliveries)."""
from __future__ import annotations

from ...errors import TargetError
from .net import fmt_addr


def check(peers: dict, names: list[str], sender: int, receiver: int, what: str,
          addr: tuple) -> None:
    """Node `sender` reaches node `receiver` at addr (`what`: "node X (step ...):
    connects to", ...). A node that declares its peers (`peers`: index -> the indexes
    it may reach) may reach only them and itself; anything else is a target error
    (exit 3) naming the address and the node that listens there."""
    allowed = peers.get(sender)
    if allowed is None or receiver == sender or receiver in allowed:
        return
    listed = ", ".join(names[i] for i in sorted(allowed)) or "none"
    raise TargetError(f"{what} {fmt_addr(addr)}, where node {names[receiver]} listens, which is not "
                      f"among its peers (the model's line: peers {names[sender]}: {listed})")
