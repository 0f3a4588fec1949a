"""The statements of a model file as parser.py reads them, located, before load.py
checks them and assembles a Model (docs/model-file.md): internal to cmc.lang."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cmc.lang.ast import Expr, Loc

if TYPE_CHECKING:
    from cmc.lang.parser import Text


@dataclass(frozen=True)
class Statement:
    keyword: str
    loc: Loc  # the statement's keyword


@dataclass(frozen=True)
class ParamStmt(Statement):
    name: str
    name_loc: Loc
    value: object
    value_loc: Loc


@dataclass(frozen=True)
class BuildStmt(Statement):
    command: Text


@dataclass(frozen=True)
class NodeStmt(Statement):
    name: str
    name_loc: Loc
    command: Text
    kind: tuple | None = None   # (word, loc): `node n1 = maelstrom "..."`


@dataclass(frozen=True)
class JsonBody:
    """A request written as a JSON object (a Maelstrom client's): its value, and where
    its opening brace is."""
    value: dict
    loc: Loc


@dataclass(frozen=True)
class ClientStmt(Statement):
    name: str
    name_loc: Loc
    address: Text | None        # "HOST:PORT"; None when the client names a node
    requests: tuple             # of Text, or JsonBody
    after: tuple | None = None  # (number, unit, loc): `client NAME after 2s -> ...`
    node: tuple | None = None   # (name, loc): `client c1 -> n1: {...}`


@dataclass(frozen=True)
class ServiceStmt(Statement):
    name: str                   # lin-kv, seq-kv, lww-kv, lin-tso
    name_loc: Loc


@dataclass(frozen=True)
class ReplyStmt(Statement):
    regex: re.Pattern[str]
    regex_loc: Loc
    group_locs: dict[str, Loc]  # where each named group is written


@dataclass(frozen=True)
class NetworkStmt(Statement):
    kind: str
    kind_loc: Loc


@dataclass(frozen=True)
class DiskStmt(Statement):
    kind: str
    kind_loc: Loc
    variant: str | None
    variant_loc: Loc | None


@dataclass(frozen=True)
class TimeStmt(Statement):
    kind: str                   # async | virtual
    kind_loc: Loc
    options: tuple              # (name, name_loc, number, unit, value_loc): `latency 10ms`


@dataclass(frozen=True)
class MachineStmt(Statement):
    item: str                   # cpus | memory | pids
    item_loc: Loc
    number: int | None          # cpus', memory's
    unit: str | None            # memory's: KiB MiB GiB; pids': shared | private
    value_loc: Loc


@dataclass(frozen=True)
class PeersStmt(Statement):
    node: str
    node_loc: Loc
    peers: tuple[tuple[str, Loc], ...]   # each peer's name and where it is written


@dataclass(frozen=True)
class BudgetStmt(Statement):
    kind: str
    kind_loc: Loc
    value: int
    value_loc: Loc


@dataclass(frozen=True)
class PropertyStmt(Statement):
    name: str
    name_loc: Loc
    expr: Expr | None           # None: linearizable, transactional
    level: str | None = None    # transactional: the consistency level
    level_loc: Loc | None = None


@dataclass(frozen=True)
class OpStmt(Statement):
    kind: str
    kind_loc: Loc
    regex: re.Pattern[str]
    regex_loc: Loc
    group_locs: dict[str, Loc]
