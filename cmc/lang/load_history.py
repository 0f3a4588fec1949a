"""The statements of a model's history (docs/model-file.md, "Histories" and
"Transactions"): `reply`, `op`, and the checks that a `linearizable` or
`transactional` property has what it reads."""
from __future__ import annotations

import difflib

from cmc.lang.ast import MaelstromDecl, OpDecl, Property, ReplyDecl, error_at
from cmc.lang.statements import OpStmt, ReplyStmt

# The fields of a reply record, which a reply regex's groups may not hide.
RECORD_FIELDS = ("client", "node", "index", "req", "raw")


def suggest(word: str, choices) -> str:
    """ (did you mean X?) for the choice closest to `word`, if one is close."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def reply_decl(stmt: ReplyStmt) -> ReplyDecl:
    for group in stmt.regex.groupindex:
        if group in RECORD_FIELDS:
            raise error_at(stmt.group_locs.get(group, stmt.regex_loc),
                           f"the regex group {group} would hide the record's own field "
                           f"{group} (the fields are {', '.join(RECORD_FIELDS)}); rename it")
    return ReplyDecl(stmt.regex, stmt.regex_loc)


OP_KINDS = ("read", "write")


def op_decl(stmt: OpStmt) -> OpDecl:
    if stmt.kind not in OP_KINDS:
        raise error_at(stmt.kind_loc, f"unknown op kind {stmt.kind}"
                       f"{suggest(stmt.kind, OP_KINDS)}: an op line is  op read /REGEX/  "
                       "or  op write /REGEX/")
    groups = stmt.regex.groupindex
    if stmt.kind == "write" and "val" not in groups:
        raise error_at(stmt.regex_loc, "a write's regex needs a group named val, the value "
                       r"written, as in /SET (?P<key>\S+) (?P<val>\S+)/")
    if stmt.kind == "read" and "val" in groups:
        raise error_at(stmt.group_locs.get("val", stmt.regex_loc), "a read's value is the "
                       "val field of its reply (the reply line's group val), not a group "
                       "of its request: rename this group")
    return OpDecl(stmt.kind, stmt.regex, stmt.kind_loc)


def check_history(properties: list[Property], ops: list[OpDecl],
                   reply: ReplyDecl | None, maelstrom: MaelstromDecl | None = None) -> None:
    """A linearizable property needs op lines (or Maelstrom clients, whose read, write
    and cas bodies are operations as they are), and reads need a reply with a val."""
    txns = [p for p in properties if p.kind == "transactional"]
    if txns and (maelstrom is None or not maelstrom.clients):
        raise error_at(txns[0].loc, f"transactional {txns[0].name} checks the transactions "
                       "(txn requests) of Maelstrom clients, and this model has none: add "
                       'lines like  client c1 -> n1: {"type": "txn", "txn": [["r", 1, null]]}')
    checked = [p for p in properties if p.kind == "linearizable"]
    if checked and not ops and maelstrom is not None and maelstrom.clients:
        return
    if checked and not ops:
        raise error_at(checked[0].loc, f"linearizable {checked[0].name} checks the history "
                       "of the requests that op lines classify, and this model has none: "
                       r"add lines like  op write /SET (?P<key>\S+) (?P<val>\S+)/  and  "
                       r"op read /GET (?P<key>\S+)/")
    reads = [op for op in ops if op.kind == "read"]
    if checked and reads and (reply is None or "val" not in reply.regex.groupindex):
        raise error_at(reads[0].loc, "a read's value is the val field of its reply record, "
                       "and " + ("this model has no reply line" if reply is None else
                                 "the reply line's regex has no group val") +
                       r": add one, as in  reply /VALUE (?P<val>\S+)/")
