// gokafka: Maelstrom's kafka workload (Gossip Glomers' challenge 5) in Go, on
// gobroadcast's msgloop (docs/maelstrom.md). The first node of node_ids leads: it keeps
// every key's log (a message's offset is its place in it) and the committed offsets,
// and answers send, commit_offsets and list_committed_offsets; any other node forwards
// those to it and relays its answer (a lost forward leaves the client unanswered; no
// timers, no resends). After an append the leader sends every other node the message
// and its offset, fire and forget (replicate), which a follower keeps at that offset
// (place, in place_correct.go). Every node answers poll from its own copy: a follower
// only the run of offsets it has from the one asked (run), so a replicate lost or not
// yet there hides the later messages at that follower, never skips one; the leader's
// polls see every message.
// The bug build (place_bug.go) keeps a replicate at the end of the follower's log: two
// replicates the network delivers out of order swap their messages' offsets there.
// One P (GOMAXPROCS 1): fewer runtime threads, fewer of their ticks for cmc to order.
package main

import (
	"encoding/json"
	"runtime"
	"sort"

	"gobroadcast/msgloop"
)

type fields = msgloop.Fields

// copied is m's body as it came (numbers exact), without the ids msgloop sets anew.
func copied(m msgloop.Message) fields {
	raw, body := map[string]json.RawMessage{}, fields{}
	m.Decode(&raw)
	for k, v := range raw {
		if k != "msg_id" && k != "in_reply_to" {
			body[k] = v
		}
	}
	return body
}

func main() {
	runtime.GOMAXPROCS(1)
	node := msgloop.New()
	logs := map[string]map[int]json.RawMessage{} // key -> offset -> message
	committed := map[string]json.RawMessage{}    // key -> its committed offset (leader)

	store := func(key string, offset int, msg json.RawMessage) {
		if logs[key] == nil {
			logs[key] = map[int]json.RawMessage{}
		}
		logs[key][offset] = msg
	}
	// lead answers m at the leader, or has the leader answer it and relays its answer.
	lead := func(m msgloop.Message, answer func() fields) {
		if node.ID == node.IDs[0] {
			node.Reply(m, answer())
			return
		}
		node.RPC(node.IDs[0], copied(m), func(r msgloop.Message) { node.Reply(m, copied(r)) })
	}

	node.Handle("send", func(m msgloop.Message) {
		var req struct {
			Key string          `json:"key"`
			Msg json.RawMessage `json:"msg"`
		}
		m.Decode(&req)
		lead(m, func() fields {
			offset := len(logs[req.Key]) // the leader's logs have no gaps
			store(req.Key, offset, req.Msg)
			for _, peer := range node.IDs[1:] {
				node.Send(peer, fields{"type": "replicate", "key": req.Key,
					"offset": offset, "msg": req.Msg})
			}
			return fields{"type": "send_ok", "offset": offset}
		})
	})

	node.Handle("replicate", func(m msgloop.Message) {
		var rep struct {
			Key    string          `json:"key"`
			Offset int             `json:"offset"`
			Msg    json.RawMessage `json:"msg"`
		}
		m.Decode(&rep)
		store(rep.Key, place(logs[rep.Key], rep.Offset), rep.Msg)
	})

	node.Handle("poll", func(m msgloop.Message) {
		var req struct {
			Offsets map[string]int `json:"offsets"`
		}
		m.Decode(&req)
		keys := []string{}
		for k := range req.Offsets {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		msgs := map[string][][]any{}
		for _, k := range keys {
			if got := run(logs[k], req.Offsets[k]); len(got) > 0 {
				msgs[k] = got
			}
		}
		node.Reply(m, fields{"type": "poll_ok", "msgs": msgs})
	})

	node.Handle("commit_offsets", func(m msgloop.Message) {
		var req struct {
			Offsets map[string]json.RawMessage `json:"offsets"`
		}
		m.Decode(&req)
		lead(m, func() fields {
			for k, o := range req.Offsets {
				committed[k] = o
			}
			return fields{"type": "commit_offsets_ok"}
		})
	})

	node.Handle("list_committed_offsets", func(m msgloop.Message) {
		var req struct {
			Keys []string `json:"keys"`
		}
		m.Decode(&req)
		lead(m, func() fields {
			offsets := map[string]json.RawMessage{}
			for _, k := range req.Keys {
				if o, ok := committed[k]; ok {
					offsets[k] = o
				}
			}
			return fields{"type": "list_committed_offsets_ok", "offsets": offsets}
		})
	})
	node.Run()
}

// run: the messages of log from offset `from` on, up to the first offset it lacks (a
// replicate a follower lost or has yet to get): what a poll may answer, skipping none.
func run(log map[int]json.RawMessage, from int) [][]any {
	msgs := [][]any{}
	for o := from; log[o] != nil; o++ {
		msgs = append(msgs, []any{o, log[o]})
	}
	return msgs
}
