#!/usr/bin/env python3
"""Maelstrom's lin-kv workload on a small Raft: a key-value store with read, write and
compare-and-set that must be linearizable, replicated by a log the nodes agree on.

- Election. Each node has a term and the vote it gave in that term. A node that has
  heard from no leader (and given no vote) during one election period stands: it moves
  to the next term, votes for itself and asks the others for their votes; a node grants
  its vote once per term, and only to a candidate whose log is at least as up to date
  as its own (by the term of the last entry, then the length). A majority makes the
  candidate the leader. A message with a higher term makes anyone a follower of it.
  The election periods grow with a node's place in node_ids (250 ms, 1 s, 1.75 s, ...)
  where a deployment would draw them at random: the first node stands first, and the
  search does not spend itself on split votes.
- Replication. The leader appends each client request to its log and sends every
  follower the entries it may lack, with the index and term of the entry before them;
  a follower whose log has no such entry refuses, and the leader steps back one entry.
  A follower drops what conflicts and appends the rest (log matching). The leader
  sends again every 500 ms, entries or none (the heartbeat that keeps followers from
  standing). A new leader's first round goes with its first request or its next
  heartbeat, not at once as in the paper: the round at once would cross the last vote
  on its way, and those orders would multiply the search for nothing Raft's safety
  rests on.
- Commit and apply. An entry of the leader's own term held by a majority is committed,
  with all before it; every node applies committed entries in log order to its store,
  and the leader answers the request of each one it applies. Reads go through the log
  like writes, so a read is answered only once it is ordered after every write
  acknowledged before it.
- Clients. A follower forwards a request to the leader it knows and relays the answer;
  a node that knows no leader answers error 11 (temporarily unavailable: nothing was
  done).

--bug: a follower answers a read from its own store, which lags the leader's until
the leader tells it the new commit index: a read that starts after a write was
acknowledged may not see it."""
import json
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
HEARTBEAT = 0.5                 # seconds between the leader's rounds of append_entries
node = Node()

term = 0                        # the newest term this node has seen
voted_for = None                # whom it voted for in that term
log = []                        # entries {"term", "op"}; log index i is log[i - 1]
commit = 0                      # entries 1..commit are committed
applied = 0                     # entries 1..applied are applied to data
role = "follower"               # follower, candidate or leader
leader = None                   # the leader of this term, once known
votes = set()                   # (candidate) who voted for it in this term
next_index = {}                 # (leader) peer -> the first entry to send it
match_index = {}                # (leader) peer -> entries known to be in its log
waiting = {}                    # (leader) log index -> the request to answer
heard = False                   # heard from a leader, or voted, this election period
data = {}                       # the store: key, as JSON text -> value


def peers():
    return [p for p in node.node_ids if p != node.node_id]


def majority():
    return len(node.node_ids) // 2 + 1


def term_at(index):
    return log[index - 1]["term"] if index > 0 else 0


def execute(op):
    """Apply op to the store; its answer."""
    key = json.dumps(op["key"])
    kind = op["type"]
    if kind == "read":
        if key not in data:
            return {"type": "error", "code": 20, "text": "no such key"}
        return {"type": "read_ok", "value": data[key]}
    if kind == "write":
        data[key] = op["value"]
        return {"type": "write_ok"}
    if key not in data:
        return {"type": "error", "code": 20, "text": "no such key"}
    if data[key] != op["from"]:
        return {"type": "error", "code": 22, "text": f"the value is {data[key]}"}
    data[key] = op["to"]
    return {"type": "cas_ok"}


def follow(new_term, new_leader=None):
    """Become a follower of new_term (not older than ours), and of its leader if known."""
    global term, voted_for, role, leader
    if new_term > term:
        term, voted_for, leader = new_term, None, None
    if role == "leader":
        waiting.clear()         # unanswered: those entries may yet be committed by another
    role = "follower"
    if new_leader is not None:
        leader = new_leader


# Election

def election_tick():
    global heard
    if role != "leader" and not heard:
        stand()
    heard = False


def stand():
    global term, voted_for, role, leader, votes
    term += 1
    role, voted_for, leader, votes = "candidate", node.node_id, None, {node.node_id}
    node.log(f"{node.node_id} stands in term {term}")
    for peer in peers():
        node.rpc(peer, {"type": "request_vote", "term": term, "candidate": node.node_id,
                        "last_index": len(log), "last_term": term_at(len(log))}, counted)


def counted(reply):
    body = reply["body"]
    if body["term"] > term:
        follow(body["term"])
        return
    if role != "candidate" or body["term"] != term or not body["granted"]:
        return
    votes.add(reply["src"])
    if len(votes) >= majority():
        lead()


def lead():
    global role, leader
    role, leader = "leader", node.node_id
    node.log(f"{node.node_id} leads term {term}")
    for peer in peers():
        next_index[peer] = len(log) + 1
        match_index[peer] = 0
    # its first round of append_entries goes with the first request or the next
    # heartbeat, both well within the followers' election periods


@node.on("request_vote")
def request_vote(msg):
    global voted_for, heard
    body = msg["body"]
    if body["term"] > term:
        follow(body["term"])
    up_to_date = (body["last_term"], body["last_index"]) >= (term_at(len(log)), len(log))
    granted = (body["term"] == term and voted_for in (None, body["candidate"])
               and up_to_date)
    if granted:
        voted_for = body["candidate"]
        heard = True
    node.reply(msg, {"type": "request_vote_ok", "term": term, "granted": granted})


# Replication

def replicate():
    for peer in peers():
        send_entries(peer)


def send_entries(peer):
    prev = next_index[peer] - 1
    body = {"type": "append_entries", "term": term, "leader": node.node_id,
            "prev_index": prev, "prev_term": term_at(prev), "entries": log[prev:],
            "commit": commit}
    node.rpc(peer, body, lambda reply: appended(peer, reply))


def appended(peer, reply):
    body = reply["body"]
    if body["term"] > term:
        follow(body["term"])
        return
    if role != "leader" or body["term"] != term:
        return
    if body["success"]:
        match_index[peer] = max(match_index[peer], body["match"])
        next_index[peer] = match_index[peer] + 1
        advance()
    elif next_index[peer] > 1:
        next_index[peer] -= 1           # its log lacks the entry before: step back
        send_entries(peer)


def advance():
    """Commit the newest entry of this term that a majority holds, and all before it."""
    global commit
    for index in range(len(log), commit, -1):
        if term_at(index) != term:
            break
        holders = 1 + sum(1 for peer in peers() if match_index[peer] >= index)
        if holders >= majority():
            commit = index
            apply()
            break


def apply():
    global applied
    while applied < commit:
        applied += 1
        answer = execute(log[applied - 1]["op"])
        request = waiting.pop(applied, None)
        if request is not None:
            node.reply(request, answer)


@node.on("append_entries")
def append_entries(msg):
    global commit, heard
    body = msg["body"]
    if body["term"] < term:
        node.reply(msg, {"type": "append_entries_ok", "term": term, "success": False})
        return
    follow(body["term"], body["leader"])
    heard = True
    prev = body["prev_index"]
    if prev > len(log) or term_at(prev) != body["prev_term"]:
        node.reply(msg, {"type": "append_entries_ok", "term": term, "success": False})
        return
    for offset, entry in enumerate(body["entries"]):
        index = prev + 1 + offset
        if index <= len(log) and log[index - 1]["term"] != entry["term"]:
            del log[index - 1:]         # a conflict: this entry and all after it go
        if index > len(log):
            log.append(entry)
    match = prev + len(body["entries"])
    # what the leader has committed, as far as this message shows this log agrees
    if min(body["commit"], match) > commit:
        commit = min(body["commit"], match)
        apply()
    node.reply(msg, {"type": "append_entries_ok", "term": term, "success": True,
                     "match": match})


def heartbeat():
    if role == "leader":
        replicate()


# Clients

def serve(msg):
    body = msg["body"]
    op = {k: v for k, v in body.items() if k != "msg_id"}
    if role == "leader":
        log.append({"term": term, "op": op})
        waiting[len(log)] = msg
        replicate()
    elif BUG and body["type"] == "read":
        node.reply(msg, execute(op))
    elif leader is not None:
        def relay(reply):
            node.reply(msg, {k: v for k, v in reply["body"].items()
                             if k not in ("msg_id", "in_reply_to")})
        node.rpc(leader, op, relay)
    else:
        node.reply(msg, {"type": "error", "code": 11, "text": "no leader known"})


for kind in ("read", "write", "cas"):
    node.on(kind)(serve)


# The election period depends on the node's place, known only once init has come.
start = node.handlers["init"]


@node.on("init")
def init(msg):
    start(msg)
    place = node.node_ids.index(node.node_id)
    node.every(0.25 + 0.75 * place, election_tick)


node.every(HEARTBEAT, heartbeat)
node.run()
