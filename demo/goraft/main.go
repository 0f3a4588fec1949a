// goraft: Raft (Ongaro and Ousterhout, Figure 2) for three nodes, in Go with the
// standard library only, written the way a small Go service ships: a goroutine per
// connection, one goroutine that owns the state, a time.Timer, an append-only file.
//
//	goraft INDEX ADDR0 ADDR1 ADDR2
//	e.g. goraft 0 127.0.0.1:7600 127.0.0.1:7601 127.0.0.1:7602
//
// Timing is deterministic, with no randomness: node i's election timeout is
// 150 ms + 50 ms * i, so node 0 stands first; a leader sends AppendEntries every
// 100 ms (less than any election timeout; not less by much, so that a checker bounded
// in time sees few heartbeats that change nothing). A follower whose election timer runs out becomes a candidate of the next term,
// votes for itself and asks the others; a node grants one vote per term, to a candidate
// whose log is at least as up to date as its own, and only once the vote is on disk.
// An entry of the leader's term is committed once a majority has it on disk; the
// commit index travels in AppendEntries. There is no no-op entry: nothing commits an
// entry of an older term but a newer entry of the leader's own term (the rule of
// Figure 8 holds without it).
//
// Peers: every message is one text line. A node dials a peer when it first has
// something to send it (and again after the connection broke; the node's loop waits
// for the dial) and the peer answers on that same connection:
//
//	RV  term cand lastIdx lastTerm                    -> RVR term granted from
//	AE  term leader prevIdx prevTerm commit t,cmd ... -> AER term ok match from
//
// Clients: "PUT k v" -> "OK" once the entry k=v is committed, "NOTLEADER" at a node
// that is not the leader. A message whose term is older than the node's is answered
// with the node's term (RVR/AER ... 0), which turns the sender into a follower.
//
// Disk: the file "raft.log" in the working directory, append-only: "T term vote"
// when the term or the vote changes, "E index term cmd" for an entry (replacing
// whatever was at that index and after it). Every record is fsynced before anything
// is sent that depends on it. A node reads the file back when it starts.
//
// It reports its state for a model checker, at no cost outside one: one JSON line on
// fd 3 whenever it changes (docs/target-contract.md, "fd 3 and fd 193"): term, vote,
// role, commit, log, and what decides what the node does next (the votes of a
// candidate, next and match of a leader, the log indexes clients wait on).
//
// Built with -tags bug (sync_bug.go), the leader counts its own copy of a new entry
// toward the majority before that copy is on its disk: with one follower's ack it
// commits and answers OK, and a crash of the leader leaves the write on one node.
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
	"time"
)

const heartbeat = 100 * time.Millisecond

type entry struct {
	term int
	cmd  string
}

// An event is a line read from a connection, or its end (line "").
type event struct {
	c    net.Conn
	line string
}

type node struct {
	id      int
	addrs   []string
	term    int
	vote    int // -1: no vote in this term
	log     []entry
	commit  int
	role    string
	votes   []bool           // a candidate's votes
	next    []int            // a leader's next index to send, per node
	match   []int            // a leader's highest index known on disk, per node
	peers   []net.Conn       // the connections this node dialed, nil when down
	waiting map[int]net.Conn // log index -> the client waiting for its commit
	file    *os.File
	state   *os.File
	last    string // the last line on fd 3
	events  chan event
	timer   *time.Timer
}

func (n *node) electionTimeout() time.Duration {
	return 150*time.Millisecond + time.Duration(n.id)*50*time.Millisecond
}

// setTimer arms the one timer of the node: an election timeout, or a leader's
// heartbeat.
func (n *node) setTimer(d time.Duration) {
	if !n.timer.Stop() {
		select {
		case <-n.timer.C:
		default:
		}
	}
	n.timer.Reset(d)
}

func ints(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// emit writes the state on fd 3 when it changed (an unchanged line would be a
// visible step for nothing).
func (n *node) emit() {
	entries := make([]string, len(n.log))
	for i, e := range n.log {
		cmd, _ := json.Marshal(e.cmd)
		entries[i] = fmt.Sprintf("[%d,%s]", e.term, cmd)
	}
	vote := "null"
	if n.vote >= 0 {
		vote = strconv.Itoa(n.vote)
	}
	s := fmt.Sprintf("{\"commit\":%d,\"log\":[%s],\"role\":%q,\"term\":%d,\"vote\":%s",
		n.commit, strings.Join(entries, ","), n.role, n.term, vote)
	switch n.role {
	case "candidate":
		var ids []int
		for i, v := range n.votes {
			if v {
				ids = append(ids, i)
			}
		}
		s += ",\"votes\":" + ints(ids)
	case "leader":
		s += ",\"match\":" + ints(n.match) + ",\"next\":" + ints(n.next) +
			",\"waiting\":" + ints(n.waitingIndexes())
	}
	s += "}\n"
	if s != n.last {
		n.state.WriteString(s)
		n.last = s
	}
}

// record appends records to the file and, when sync is set, fsyncs it.
func (n *node) record(recs string, sync bool) {
	if _, err := n.file.WriteString(recs); err != nil {
		fail(err)
	}
	if sync {
		if err := n.file.Sync(); err != nil {
			fail(err)
		}
	}
}

func (n *node) saveTerm() {
	n.record(fmt.Sprintf("T %d %d\n", n.term, n.vote), true)
}

// recover reads the file back.
func (n *node) recover() {
	data, err := os.ReadFile("raft.log")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "T":
			n.term, n.vote = atoi(f[1]), atoi(f[2])
		case len(f) == 4 && f[0] == "E":
			i := atoi(f[1])
			n.log = append(n.log[:i-1], entry{atoi(f[2]), f[3]})
		}
	}
}

func (n *node) lastTerm() int {
	if len(n.log) == 0 {
		return 0
	}
	return n.log[len(n.log)-1].term
}

// send writes a line to peer p, dialing it first if there is no connection; a
// message that cannot be sent is lost (Raft resends at the next heartbeat).
func (n *node) send(p int, line string) {
	if n.peers[p] == nil {
		c, err := net.Dial("tcp", n.addrs[p])
		if err != nil {
			return
		}
		n.peers[p] = c
		go n.read(c)
	}
	if _, err := n.peers[p].Write([]byte(line)); err != nil {
		n.peers[p].Close()
		n.peers[p] = nil
	}
}

func (n *node) others() []int {
	var ps []int
	for p := range n.addrs {
		if p != n.id {
			ps = append(ps, p)
		}
	}
	return ps
}

// appendEntries sends peer p what it lacks from next[p] on, and the commit index.
func (n *node) appendEntries(p int) {
	prev := n.next[p] - 1
	prevTerm := 0
	if prev > 0 {
		prevTerm = n.log[prev-1].term
	}
	line := fmt.Sprintf("AE %d %d %d %d %d", n.term, n.id, prev, prevTerm, n.commit)
	for _, e := range n.log[prev:] {
		line += fmt.Sprintf(" %d,%s", e.term, e.cmd)
	}
	n.send(p, line+"\n")
}

// stepDown follows a newer term. A leader's heartbeat timer becomes an election
// timer; a follower's or a candidate's runs on.
func (n *node) stepDown(term int) {
	if n.role == "leader" {
		n.dropClients()
		n.setTimer(n.electionTimeout())
	}
	n.term, n.vote, n.role = term, -1, "follower"
	n.votes, n.next, n.match = nil, nil, nil
	n.saveTerm()
}

// waitingIndexes lists the log indexes clients wait on, in order (never in Go's map
// order, which differs from run to run).
func (n *node) waitingIndexes() []int {
	var idx []int
	for i := range n.waiting {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// dropClients closes the connections of clients waiting on a leader that is no more:
// their writes may or may not commit.
func (n *node) dropClients() {
	for _, i := range n.waitingIndexes() {
		n.waiting[i].Close()
		delete(n.waiting, i)
	}
}

func (n *node) timeout() {
	if n.role == "leader" {
		for _, p := range n.others() {
			n.appendEntries(p)
		}
		n.setTimer(heartbeat)
		return
	}
	n.term++
	n.vote, n.role = n.id, "candidate"
	n.votes = make([]bool, len(n.addrs))
	n.votes[n.id] = true
	n.saveTerm()
	n.setTimer(n.electionTimeout())
	for _, p := range n.others() {
		n.send(p, fmt.Sprintf("RV %d %d %d %d\n", n.term, n.id, len(n.log), n.lastTerm()))
	}
}

func (n *node) becomeLeader() {
	n.role, n.votes = "leader", nil
	n.next = make([]int, len(n.addrs))
	n.match = make([]int, len(n.addrs))
	for _, p := range n.others() {
		n.next[p] = len(n.log) + 1
	}
	n.match[n.id] = len(n.log) // next[id] stays 0, unused
	n.timeout()                // the first heartbeat at once
}

// advance commits the highest index of the leader's term that a majority has.
func (n *node) advance() {
	for i := len(n.log); i > n.commit && n.log[i-1].term == n.term; i-- {
		count := 0
		for _, m := range n.match {
			if m >= i {
				count++
			}
		}
		if 2*count > len(n.addrs) {
			n.commit = i
			break
		}
	}
	for _, i := range n.waitingIndexes() {
		if i <= n.commit {
			n.waiting[i].Write([]byte("OK\n"))
			delete(n.waiting, i)
		}
	}
}

func (n *node) handle(ev event) {
	if ev.line == "" { // a connection ended
		for p, c := range n.peers {
			if c == ev.c {
				n.peers[p] = nil
			}
		}
		for i, c := range n.waiting {
			if c == ev.c {
				delete(n.waiting, i)
			}
		}
		ev.c.Close()
		return
	}
	f := strings.Fields(ev.line)
	if len(f) == 0 {
		return
	}
	if f[0] == "PUT" {
		n.put(ev.c, f)
		return
	}
	if size := map[string]int{"RV": 5, "RVR": 4, "AE": 6, "AER": 5}[f[0]]; size == 0 || len(f) < size {
		return
	}
	term := atoi(f[1])
	if term > n.term {
		n.stepDown(term)
	}
	switch f[0] {
	case "RV": // RV term cand lastIdx lastTerm
		cand, lastIdx, lastTerm := atoi(f[2]), atoi(f[3]), atoi(f[4])
		upToDate := lastTerm > n.lastTerm() || (lastTerm == n.lastTerm() && lastIdx >= len(n.log))
		granted := 0
		if term == n.term && (n.vote == -1 || n.vote == cand) && upToDate {
			if n.vote != cand {
				n.vote = cand
				n.saveTerm()
			}
			n.setTimer(n.electionTimeout())
			granted = 1
		}
		ev.c.Write([]byte(fmt.Sprintf("RVR %d %d %d\n", n.term, granted, n.id)))
	case "RVR": // RVR term granted from
		if n.role == "candidate" && term == n.term && f[2] == "1" {
			n.votes[atoi(f[3])] = true
			count := 0
			for _, v := range n.votes {
				if v {
					count++
				}
			}
			if 2*count > len(n.addrs) {
				n.becomeLeader()
			}
		}
	case "AE": // AE term leader prevIdx prevTerm commit entries...
		n.appendReceived(ev.c, term, f)
	case "AER": // AER term ok match from
		if n.role != "leader" || term != n.term {
			return
		}
		p, m := atoi(f[4]), atoi(f[3])
		if f[2] == "1" {
			if m > n.match[p] {
				n.match[p] = m
			}
			n.next[p] = n.match[p] + 1
			n.advance()
		} else if n.next[p] > m+1 {
			n.next[p] = m + 1 // resent from there at the next heartbeat
		}
	}
}

func (n *node) appendReceived(c net.Conn, term int, f []string) {
	if term < n.term {
		c.Write([]byte(fmt.Sprintf("AER %d 0 0 %d\n", n.term, n.id)))
		return
	}
	if n.role != "follower" {
		n.role, n.votes = "follower", nil
	}
	n.setTimer(n.electionTimeout())
	prev, prevTerm, commit := atoi(f[3]), atoi(f[4]), atoi(f[5])
	if prev > len(n.log) || (prev > 0 && n.log[prev-1].term != prevTerm) {
		// not there yet: the leader backs off to what this node surely has
		have := len(n.log)
		if prev-1 < have {
			have = prev - 1
		}
		c.Write([]byte(fmt.Sprintf("AER %d 0 %d %d\n", n.term, have, n.id)))
		return
	}
	recs := ""
	for k, s := range f[6:] {
		i := prev + k + 1
		t, cmd, _ := strings.Cut(s, ",")
		e := entry{atoi(t), cmd}
		if i <= len(n.log) && n.log[i-1] == e {
			continue
		}
		n.log = append(n.log[:i-1], e)
		recs += fmt.Sprintf("E %d %d %s\n", i, e.term, e.cmd)
	}
	if recs != "" {
		n.record(recs, true)
	}
	match := prev + len(f) - 6
	if commit > match {
		commit = match
	}
	if commit > n.commit {
		n.commit = commit
	}
	c.Write([]byte(fmt.Sprintf("AER %d 1 %d %d\n", n.term, match, n.id)))
}

// put takes a client's write: the leader appends it and replicates it at once.
func (n *node) put(c net.Conn, f []string) {
	if n.role != "leader" || len(f) != 3 {
		c.Write([]byte("NOTLEADER\n"))
		return
	}
	e := entry{n.term, f[1] + "=" + f[2]}
	n.log = append(n.log, e)
	n.record(fmt.Sprintf("E %d %d %s\n", len(n.log), e.term, e.cmd), !countBeforeSync)
	n.match[n.id] = len(n.log)
	n.waiting[len(n.log)] = c
	for _, p := range n.others() {
		n.appendEntries(p)
	}
}

// read turns the lines of a connection into events for the node's loop.
func (n *node) read(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			n.events <- event{c, ""}
			return
		}
		if line != "\n" {
			n.events <- event{c, strings.TrimSuffix(line, "\n")}
		}
	}
}

func atoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return v
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "goraft:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: goraft INDEX ADDR0 ADDR1 ADDR2")
		os.Exit(2)
	}
	n := &node{id: atoi(os.Args[1]), addrs: os.Args[2:], vote: -1, role: "follower",
		waiting: map[int]net.Conn{}, events: make(chan event), state: os.NewFile(3, "state")}
	if n.id < 0 || n.id >= len(n.addrs) {
		fmt.Fprintln(os.Stderr, "goraft: bad INDEX")
		os.Exit(2)
	}
	n.peers = make([]net.Conn, len(n.addrs))
	n.recover()
	file, err := os.OpenFile("raft.log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fail(err)
	}
	n.file = file
	l, err := net.Listen("tcp", n.addrs[n.id])
	if err != nil {
		fail(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				fail(err)
			}
			go n.read(c)
		}
	}()
	n.timer = time.NewTimer(n.electionTimeout())
	n.emit()
	for {
		select {
		case ev := <-n.events:
			n.handle(ev)
		case <-n.timer.C:
			n.timeout()
		}
		n.emit()
	}
}
