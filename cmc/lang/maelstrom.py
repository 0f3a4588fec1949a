"""The Maelstrom lines of a model file (docs/maelstrom.md; docs/model-file.md, `node NAME =
maelstrom "COMMAND"`, Maelstrom clients, `service`): checked and assembled into the
model's MaelstromDecl."""
from __future__ import annotations

import difflib
import json

from cmc.lang.ast import Loc, MaelstromClientDecl, MaelstromDecl, error_at
from cmc.lang.parser import JsonBody, ServiceStmt

# the node kinds, the built-in services, and the client name cmc's init comes from
NODE_KINDS = ("maelstrom",)
SERVICES = ("lin-kv", "seq-kv", "lww-kv", "lin-tso")
INIT_SENDER = "c0"


def _suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _first_at(loc: Loc) -> str:
    return f"the first is at line {loc.line}"


def no_bodies(stmt) -> None:
    """A client of an address (TCP) sends strings: a JSON body there is an error."""
    body = next((r for r in stmt.requests if isinstance(r, JsonBody)), None)
    if body is not None:
        raise error_at(body.loc, f"client {stmt.name} sends to an address: its requests are "
                       "strings; a JSON body is a request to a Maelstrom node (client NAME "
                       "-> NODE: {...})")


def node_kind(word: str, loc: Loc) -> str:
    """The kind of a node (`node NAME = KIND "COMMAND"`), or a located error."""
    if word not in NODE_KINDS:
        raise error_at(loc, f"unknown node kind {word}{_suggest(word, NODE_KINDS)}"
                       ': a node is  node NAME = "COMMAND"  or, speaking Maelstrom\'s '
                       'protocol on stdin and stdout,  node NAME = maelstrom "COMMAND"')
    return word


def service(stmt: ServiceStmt, services: list, lines: dict) -> str:
    if stmt.name not in SERVICES:
        raise error_at(stmt.name_loc, f"unknown service {stmt.name}"
                       f"{_suggest(stmt.name, SERVICES)}: cmc has {', '.join(SERVICES)}")
    if stmt.name in lines:
        raise error_at(stmt.name_loc, f"a second service {stmt.name} line "
                       f"({_first_at(lines[stmt.name])})")
    lines[stmt.name] = stmt.name_loc
    return stmt.name


def maelstrom(nodes: list, clients: list, services: list, service_lines: dict,
              after) -> MaelstromDecl | None:
    """The Maelstrom part of a model (docs/maelstrom.md), or None when it has none."""
    speakers = [n.name for n in nodes if n.protocol == "maelstrom"]
    if not speakers:
        if clients:
            raise error_at(clients[0].node[1], f"client {clients[0].name} names a node, "
                           "which only a client of a Maelstrom node does (node NAME = "
                           "maelstrom \"COMMAND\"); a client of a TCP server names its "
                           "address (\"127.0.0.1:7000\")")
        if services:
            raise error_at(service_lines[services[0]], "a service answers Maelstrom nodes, "
                           "and this model has none (node NAME = maelstrom \"COMMAND\")")
        return None
    out = []
    for stmt in clients:
        target, loc = stmt.node
        if target not in speakers:
            raise error_at(loc, f"client {stmt.name} -> {target}: {target} is not a "
                           f"Maelstrom node of the model ({', '.join(speakers)})"
                           f"{_suggest(target, speakers)}")
        if stmt.name == INIT_SENDER:
            raise error_at(stmt.name_loc, f"{INIT_SENDER} is the client init comes from "
                           "(Maelstrom's way); name the client otherwise")
        bodies = []
        for request in stmt.requests:
            if not isinstance(request, JsonBody):
                raise error_at(request.loc, f"client {stmt.name} is a Maelstrom client: each "
                               'request is a JSON object, the message body ({"type": "echo", '
                               '"echo": "hi"})')
            if not isinstance(request.value.get("type"), str):
                raise error_at(request.loc, 'a request body needs a "type" string (the '
                               "message's type: echo, generate, broadcast, read ...)")
            if "msg_id" in request.value:
                raise error_at(request.loc, "msg_id is cmc's to give (1, 2, ... per "
                               "client); leave it out of the body")
            bodies.append(json.dumps(request.value, separators=(",", ":"), ensure_ascii=False))
        out.append(MaelstromClientDecl(stmt.name, target, tuple(bodies), stmt.name_loc,
                                       after(stmt)))
    return MaelstromDecl(tuple(speakers), tuple(out), tuple(services))
