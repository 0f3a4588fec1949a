// gokafka: Maelstrom's kafka workload (Gossip Glomers' challenge 5) in Go, on
// gobroadcast's msgloop (docs/maelstrom.md). A node keeps nothing: the logs are in
// lin-kv. A send takes the next offset of its key by a cas on "next/<key>" (claim, in
// claim_correct.go), writes its message to "msg/<key>/<offset>" and answers send_ok
// only after write_ok. "next/<key>" holds the tags (client and msg_id) of the sends
// that took offsets 0, 1, ..., not a count: a send whose cas answer was lost reads it
// again and finds its offset there, so no offset is left without its message. A poll
// reads "msg/<key>/<o>" from the offset asked up to the first missing; commits are
// "commit/<key>". A request to lin-kv unanswered is sent again every second (each is
// idempotent, or a cas that then fails and reads again).
// The bug build (claim_bug.go) takes the offset by a read and a plain write, no cas.
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"gobroadcast/msgloop"
)

type fields = msgloop.Fields

// op is a client's request under way; retry sends its request to lin-kv again.
type op struct {
	gen   int
	retry func()
}

// answer is lin-kv's answer.
type answer struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func sorted[V any](m map[string]V) []string {
	keys := []string{}
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func main() {
	node := msgloop.New()
	ops := map[int]*op{}
	last := 0

	// begin: a new op for request m, and the function that ends it with m's answer.
	begin := func(m msgloop.Message) (*op, func(fields)) {
		last++
		id, o := last, &op{}
		ops[id] = o
		return o, func(body fields) { delete(ops, id); node.Reply(m, body) }
	}
	// call sends body to lin-kv for o; then runs on the first answer to its newest copy.
	call := func(o *op, body fields, then func(answer)) {
		o.retry = func() {
			o.gen++
			gen := o.gen
			node.RPC("lin-kv", body, func(m msgloop.Message) {
				if gen != o.gen {
					return
				}
				o.gen++
				var a answer
				m.Decode(&a)
				then(a)
			})
		}
		o.retry()
	}

	node.Handle("send", func(m msgloop.Message) {
		var req struct {
			Key   string          `json:"key"`
			Msg   json.RawMessage `json:"msg"`
			MsgID int             `json:"msg_id"`
		}
		m.Decode(&req) // the tag: the client and its msg_id, one send's own
		tag, next := fmt.Sprintf("%s/%d", m.Src, req.MsgID), "next/"+req.Key
		o, done := begin(m)
		var take func()
		store := func(offset int) {
			key := fmt.Sprintf("msg/%s/%d", req.Key, offset)
			call(o, fields{"type": "write", "key": key, "value": req.Msg}, func(answer) {
				done(fields{"type": "send_ok", "offset": offset})
			})
		}
		take = func() {
			call(o, fields{"type": "read", "key": next}, func(a answer) {
				was := []string{}             // error 20 (no value): none taken yet
				json.Unmarshal(a.Value, &was) // read_ok: the tags of offsets taken
				for offset, t := range was {
					if t == tag {
						store(offset)
						return
					}
				}
				tags := append(append([]string{}, was...), tag)
				call(o, claim(next, was, tags), func(a answer) {
					if a.Type == "error" {
						take()
					} else {
						store(len(was))
					}
				})
			})
		}
		take()
	})

	node.Handle("poll", func(m msgloop.Message) {
		var req struct {
			Offsets map[string]int `json:"offsets"`
		}
		m.Decode(&req)
		keys, msgs := sorted(req.Offsets), map[string][][]any{}
		o, done := begin(m)
		var read func(i, offset int)
		start := func(i int) { // the messages of keys[i], or the answer after the last
			if i == len(keys) {
				done(fields{"type": "poll_ok", "msgs": msgs})
			} else {
				read(i, req.Offsets[keys[i]])
			}
		}
		read = func(i, offset int) {
			key := fmt.Sprintf("msg/%s/%d", keys[i], offset)
			call(o, fields{"type": "read", "key": key}, func(a answer) {
				if a.Type != "read_ok" {
					start(i + 1)
					return
				}
				msgs[keys[i]] = append(msgs[keys[i]], []any{offset, a.Value})
				read(i, offset+1)
			})
		}
		start(0)
	})

	node.Handle("commit_offsets", func(m msgloop.Message) {
		var req struct {
			Offsets map[string]int `json:"offsets"`
		}
		m.Decode(&req)
		keys := sorted(req.Offsets)
		o, done := begin(m)
		var write func(i int)
		write = func(i int) {
			if i == len(keys) {
				done(fields{"type": "commit_offsets_ok"})
				return
			}
			body := fields{"type": "write", "key": "commit/" + keys[i], "value": req.Offsets[keys[i]]}
			call(o, body, func(answer) { write(i + 1) })
		}
		write(0)
	})

	node.Handle("list_committed_offsets", func(m msgloop.Message) {
		var req struct {
			Keys []string `json:"keys"`
		}
		m.Decode(&req)
		sort.Strings(req.Keys)
		offsets := map[string]json.RawMessage{}
		o, done := begin(m)
		var read func(i int)
		read = func(i int) {
			if i == len(req.Keys) {
				done(fields{"type": "list_committed_offsets_ok", "offsets": offsets})
				return
			}
			call(o, fields{"type": "read", "key": "commit/" + req.Keys[i]}, func(a answer) {
				if a.Type == "read_ok" {
					offsets[req.Keys[i]] = a.Value
				}
				read(i + 1)
			})
		}
		read(0)
	})

	// Every second, each request to lin-kv still unanswered goes again; none: nothing.
	node.Every(time.Second, func() {
		ids := []int{}
		for id := range ops {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			ops[id].retry()
		}
	})
	node.Run()
}
