// Package msgloop is a small Maelstrom node library of this project's own: a message
// loop over stdin, a handler per message type, replies and RPCs with callbacks, and
// periodic timers (docs/maelstrom.md). Everything runs on the loop's goroutine, so
// handlers need no locks. It knows nothing of cmc.
package msgloop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Message is one line of the protocol: {"src", "dest", "body"}.
type Message struct {
	Src  string          `json:"src"`
	Dest string          `json:"dest"`
	Body json.RawMessage `json:"body"`
}

// Fields is a message body as a map.
type Fields map[string]any

// Type is the body's type.
func (m Message) Type() string {
	var head struct {
		Type string `json:"type"`
	}
	json.Unmarshal(m.Body, &head)
	return head.Type
}

// Decode reads the body into v.
func (m Message) Decode(v any) error { return json.Unmarshal(m.Body, v) }

type timer struct {
	every time.Duration
	fn    func()
}

// Node is one Maelstrom node.
type Node struct {
	ID       string
	IDs      []string
	handlers map[string]func(Message)
	waiting  map[int]func(Message)
	timers   []timer
	nextID   int
	out      *bufio.Writer
}

// New makes a node that answers init.
func New() *Node {
	n := &Node{handlers: map[string]func(Message){}, waiting: map[int]func(Message){},
		out: bufio.NewWriter(os.Stdout)}
	n.Handle("init", func(m Message) {
		var init struct {
			NodeID  string   `json:"node_id"`
			NodeIDs []string `json:"node_ids"`
		}
		m.Decode(&init)
		n.ID, n.IDs = init.NodeID, init.NodeIDs
		n.Reply(m, Fields{"type": "init_ok"})
	})
	return n
}

// Handle makes fn the handler of messages of type kind.
func (n *Node) Handle(kind string, fn func(Message)) { n.handlers[kind] = fn }

// Every calls fn every d while the node runs.
func (n *Node) Every(d time.Duration, fn func()) { n.timers = append(n.timers, timer{d, fn}) }

// Send sends a body to dest.
func (n *Node) Send(dest string, body Fields) {
	line, _ := json.Marshal(map[string]any{"src": n.ID, "dest": dest, "body": body})
	n.out.Write(append(line, '\n'))
	n.out.Flush()
}

// Reply answers request m with body.
func (n *Node) Reply(m Message, body Fields) {
	var head struct {
		MsgID int `json:"msg_id"`
	}
	m.Decode(&head)
	body["in_reply_to"] = head.MsgID
	n.Send(m.Src, body)
}

// RPC sends a request; callback runs with its reply.
func (n *Node) RPC(dest string, body Fields, callback func(Message)) {
	n.nextID++
	n.waiting[n.nextID] = callback
	body["msg_id"] = n.nextID
	n.Send(dest, body)
}

func (n *Node) handle(m Message) {
	var head struct {
		InReplyTo *int `json:"in_reply_to"`
	}
	m.Decode(&head)
	if head.InReplyTo != nil {
		if fn, ok := n.waiting[*head.InReplyTo]; ok {
			delete(n.waiting, *head.InReplyTo)
			fn(m)
		}
		return
	}
	fn, ok := n.handlers[m.Type()]
	if !ok {
		n.Reply(m, Fields{"type": "error", "code": 10, "text": "no handler for " + m.Type()})
		return
	}
	fn(m)
}

// Run reads messages until stdin ends.
func (n *Node) Run() {
	lines := make(chan []byte)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 1<<20), 1<<20)
		for in.Scan() {
			lines <- append([]byte(nil), in.Bytes()...)
		}
		close(lines)
	}()
	ticks := make(chan func())
	for _, t := range n.timers {
		go func(t timer) {
			for range time.Tick(t.every) {
				ticks <- t.fn
			}
		}(t)
	}
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return
			}
			var m Message
			if err := json.Unmarshal(line, &m); err != nil {
				fmt.Fprintf(os.Stderr, "not a message: %s\n", line)
				continue
			}
			n.handle(m)
		case fn := <-ticks:
			fn()
		}
	}
}
