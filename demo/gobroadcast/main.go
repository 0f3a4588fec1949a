// gobroadcast: Maelstrom's broadcast workload in Go, on msgloop (docs/maelstrom.md).
// A node keeps the values it has seen; a new one it gossips to every other node, and
// until a node acknowledges it, sends it again every second (resend, in
// resend_correct.go; the bug build's never does: a lost gossip loses the value there).
package main

import (
	"sort"
	"time"

	"gobroadcast/msgloop"
)

type pair struct {
	peer  string
	value float64
}

func main() {
	node := msgloop.New()
	values := map[float64]bool{}
	unacked := map[pair]bool{}

	gossip := func(p pair) {
		node.RPC(p.peer, msgloop.Fields{"type": "gossip", "message": p.value},
			func(msgloop.Message) { delete(unacked, p) })
	}
	learn := func(v float64) {
		if values[v] {
			return
		}
		values[v] = true
		for _, peer := range node.IDs {
			if peer != node.ID {
				unacked[pair{peer, v}] = true
				gossip(pair{peer, v})
			}
		}
	}
	var body struct {
		Message float64 `json:"message"`
	}
	node.Handle("topology", func(m msgloop.Message) {
		node.Reply(m, msgloop.Fields{"type": "topology_ok"})
	})
	node.Handle("broadcast", func(m msgloop.Message) {
		m.Decode(&body)
		learn(body.Message)
		node.Reply(m, msgloop.Fields{"type": "broadcast_ok"})
	})
	node.Handle("gossip", func(m msgloop.Message) {
		m.Decode(&body)
		learn(body.Message)
		node.Reply(m, msgloop.Fields{"type": "gossip_ok"})
	})
	node.Handle("read", func(m msgloop.Message) {
		seen := []float64{}
		for v := range values {
			seen = append(seen, v)
		}
		sort.Float64s(seen)
		node.Reply(m, msgloop.Fields{"type": "read_ok", "messages": seen})
	})
	node.Every(time.Second, func() {
		if !resend {
			return
		}
		pending := []pair{}
		for p := range unacked {
			pending = append(pending, p)
		}
		sort.Slice(pending, func(i, j int) bool {
			a, b := pending[i], pending[j]
			return a.peer < b.peer || a.peer == b.peer && a.value < b.value
		})
		for _, p := range pending {
			gossip(p)
		}
	})
	node.Run()
}
