// gotxn: Maelstrom's txn-rw-register workload in Go, on msgloop (docs/maelstrom.md):
// Gossip Glomers 6c, totally available and read committed. A node runs a txn at once
// on its own store and answers; then it sends the txn's writes to every other node,
// again every second until that node acknowledges them, and a node applies what one
// message carries at once. The correct build sends a txn's net effect (the last value
// per key) as one message; the bug build each write as its own (replicate_*.go).
package main

import (
	"sort"
	"time"

	"gobroadcast/msgloop"
)

type write struct{ Key, Value int }

// outbox names one replication message until its peer acknowledges it.
type outbox struct {
	peer string
	seq  int
}

func main() {
	node := msgloop.New()
	store := map[int]int{}
	unacked := map[outbox][][2]int{}
	seq := 0

	send := func(o outbox) {
		node.RPC(o.peer, msgloop.Fields{"type": "replicate", "writes": unacked[o]},
			func(msgloop.Message) { delete(unacked, o) })
	}
	node.Handle("txn", func(m msgloop.Message) {
		var body struct {
			Txn [][3]any `json:"txn"`
		}
		m.Decode(&body)
		writes := []write{}
		for i := range body.Txn {
			op := &body.Txn[i]
			key := int(op[1].(float64))
			if op[0] == "r" {
				if v, ok := store[key]; ok {
					op[2] = v
				}
			} else {
				store[key] = int(op[2].(float64))
				writes = append(writes, write{key, store[key]})
			}
		}
		node.Reply(m, msgloop.Fields{"type": "txn_ok", "txn": body.Txn})
		if len(writes) == 0 {
			return
		}
		for _, batch := range batches(writes) {
			pairs := [][2]int{}
			for _, w := range batch {
				pairs = append(pairs, [2]int{w.Key, w.Value})
			}
			seq++
			for _, peer := range node.IDs {
				if peer != node.ID {
					o := outbox{peer, seq}
					unacked[o] = pairs
					send(o)
				}
			}
		}
	})
	node.Handle("replicate", func(m msgloop.Message) {
		var body struct {
			Writes [][2]int `json:"writes"`
		}
		m.Decode(&body)
		for _, w := range body.Writes {
			store[w[0]] = w[1]
		}
		node.Reply(m, msgloop.Fields{"type": "replicate_ok"})
	})
	node.Every(time.Second, func() {
		pending := []outbox{}
		for o := range unacked {
			pending = append(pending, o)
		}
		sort.Slice(pending, func(i, j int) bool {
			a, b := pending[i], pending[j]
			return a.seq < b.seq || a.seq == b.seq && a.peer < b.peer
		})
		for _, o := range pending {
			send(o)
		}
	})
	node.Run()
}
