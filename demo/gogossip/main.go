// gogossip: three nodes gossip a membership map, written the way a small Go service
// ships: a map, a mutex over it, a goroutine per connection, bufio.
//
//	gogossip INDEX ADDR0 ADDR1 ADDR2
//	e.g. gogossip 0 127.0.0.1:7500 127.0.0.1:7501 127.0.0.1:7502
//
// Node i is named "n<i>". Its membership map takes each member's name to its heartbeat
// version. It starts with its own heartbeat (version 3), stale heartbeats of some
// other nodes (version 1) and a few past members (seeds, below). Nodes sync their maps
// by push-pull, as memberlist does: node i dials each node of a higher index, one after
// the other (n0 dials n1, then n2; n1 dials n2), and sends its whole map; the node
// dialed merges it and answers with its own whole map, which the dialer merges in
// turn. A map goes on the wire as a line "FROM n<i>", one line "<member> <version>"
// per entry, written by ranging over the map, so in Go's map iteration order, and a
// line "END", all in one write. Connections stay open, unused, once synced.
//
// A node merges every entry gossiped to it: the higher version wins, whatever order
// the gossip arrives in. A node is the authority on its own heartbeat: gossip about
// itself is ignored. n0 syncs with n1 before it syncs with n2, so whatever the order
// of the messages, once nothing is left to deliver every node has the same map, each
// member at the highest version any node had.
//
// Clients: "GET" -> "MEMBERS <n>", the number of members the node knows.
//
// It reports its state for a model checker, at no cost outside one: one JSON line on
// fd 3 after every change (docs/target-contract.md, "fd 3 and fd 193"): the map (keys
// sorted by encoding/json, so the line does not depend on the map's order), the peers
// whose map has arrived, and how many maps it has sent.
//
// Built with -tags bug, a gossiped entry replaces the node's own whatever its version
// (last writer wins): a stale heartbeat that arrives after a fresh one takes the
// member back in time, and the nodes can end up disagreeing. Only an order of
// deliveries exposes it (merge_bug.go).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// seed is node i's map at start. Where two nodes know a member, either they agree on
// its version or one of them is that member (the authority, with the higher one).
func seed(i int) map[string]int {
	switch i {
	case 0:
		return map[string]int{"n0": 3, "n1": 1, "n2": 1, "a": 2, "b": 1}
	case 1:
		return map[string]int{"n1": 3, "n2": 1, "b": 1, "c": 1, "d": 2}
	default:
		return map[string]int{"n2": 3, "n0": 1, "a": 2, "d": 2, "e": 1}
	}
}

type node struct {
	mu      sync.Mutex
	name    string
	members map[string]int
	heard   []string   // peers whose map has arrived, sorted
	sent    int        // maps this node has sent
	peers   []net.Conn // kept open (and reachable, so that no finalizer closes them)
	state   *os.File
}

// emit reports the state on fd 3; with n.mu held.
func (n *node) emit() {
	line, err := json.Marshal(struct {
		Members map[string]int `json:"members"`
		Heard   []string       `json:"heard"`
		Sent    int            `json:"sent"`
	}{n.members, n.heard, n.sent})
	if err != nil {
		panic(err)
	}
	n.state.Write(append(line, '\n'))
}

// merge takes one gossiped entry; with n.mu held.
func (n *node) merge(member string, version int) {
	if member == n.name {
		return
	}
	if have, ok := n.members[member]; lastWriterWins || !ok || version > have {
		n.members[member] = version
	}
}

// send writes the whole map to c in one write, one line per entry in map order; with
// n.mu held.
func (n *node) send(c net.Conn) error {
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "FROM %s\n", n.name)
	for member, version := range n.members {
		fmt.Fprintf(w, "%s %d\n", member, version)
	}
	fmt.Fprintf(w, "END\n")
	if err := w.Flush(); err != nil {
		return err
	}
	n.sent++
	return nil
}

// receive reads a peer's map after its FROM line, up to END, merges it and reports
// the state; reply, when set, is called before n.mu is released.
func (n *node) receive(from string, r *bufio.Reader, reply func() error) error {
	var entries [][2]string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		f := strings.Fields(line)
		if len(f) == 1 && f[0] == "END" {
			break
		}
		if len(f) == 2 {
			entries = append(entries, [2]string{f[0], f[1]})
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range entries {
		if version, err := strconv.Atoi(e[1]); err == nil {
			n.merge(e[0], version)
		}
	}
	n.heard = append(n.heard, from)
	sort.Strings(n.heard)
	var err error
	if reply != nil {
		err = reply()
	}
	n.emit()
	return err
}

// sync dials a peer, sends it the map and merges the map it answers with.
func (n *node) sync(addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gogossip:", err)
		return
	}
	n.mu.Lock()
	n.peers = append(n.peers, c)
	err = n.send(c)
	n.emit()
	n.mu.Unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gogossip:", err)
		return
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if f := strings.Fields(line); err == nil && len(f) == 2 && f[0] == "FROM" {
		err = n.receive(f[1], r, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gogossip:", err)
	}
}

// serve reads one connection: a peer's map (answered with this node's) or a client's
// requests.
func (n *node) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "GET":
			n.mu.Lock()
			reply := fmt.Sprintf("MEMBERS %d\n", len(n.members))
			n.mu.Unlock()
			if _, err := c.Write([]byte(reply)); err != nil {
				return
			}
		case len(f) == 2 && f[0] == "FROM":
			if err := n.receive(f[1], r, func() error { return n.send(c) }); err != nil {
				return
			}
		}
	}
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: gogossip INDEX ADDR0 ADDR1 ADDR2")
		os.Exit(2)
	}
	i, err := strconv.Atoi(os.Args[1])
	addrs := os.Args[2:]
	if err != nil || i < 0 || i >= len(addrs) {
		fmt.Fprintln(os.Stderr, "gogossip: INDEX must be 0, 1 or 2")
		os.Exit(2)
	}
	n := &node{name: fmt.Sprintf("n%d", i), members: seed(i), heard: []string{},
		state: os.NewFile(3, "state")}
	n.mu.Lock()
	n.emit()
	n.mu.Unlock()
	l, err := net.Listen("tcp", addrs[i])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gogossip:", err)
		os.Exit(1)
	}
	go func() {
		for j := i + 1; j < len(addrs); j++ {
			n.sync(addrs[j])
		}
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "gogossip:", err)
			os.Exit(1)
		}
		go n.serve(c)
	}
}
