// gokv: a two-node primary/backup log, written the way a small Go service ships.
//
//	gokv INDEX PRIMARY_ADDR BACKUP_ADDR
//	e.g. gokv 0 127.0.0.1:7400 127.0.0.1:7401   (0: the primary, 1: the backup)
//
// Clients talk to the primary, one goroutine per connection:
//
//	PUT <int>  ->  ACK <int>   once the value is on the backup and on the primary's disk
//
// The primary keeps one connection to the backup, shared by its connection
// goroutines under a mutex, and forwards each PUT on it, waiting for the backup's
// ACK; a forward that finds the connection down or breaks is tried again on a new
// one (forwardTries connections in all), and a PUT that still cannot be forwarded
// closes the client's connection rather than leave it waiting. A time.Ticker also
// redials the backup when that connection is down. Each node
// keeps its log in the file "log" of its working directory, fsyncs every append and
// reads the file back when it starts. A PUT of a value already in the log is
// acknowledged without appending it again.
//
// It reports its state for a model checker, at no cost outside one: the log in
// memory as one JSON line on fd 3 after every change, the log on disk on fd 193
// after every fsync (docs/target-contract.md, "fd 3 and fd 193").
//
// Built with -tags bug, the primary acknowledges a PUT as soon as it is in its
// memory: a crash of the primary then loses a write a client was told is committed.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type node struct {
	mu      sync.Mutex
	log     []int
	file    *os.File
	state   *os.File
	durable *os.File
	backup  net.Conn // the primary's connection to the backup, nil when down
	acks    *bufio.Reader
	addr    string
}

func (n *node) has(v int) bool {
	for _, x := range n.log {
		if x == v {
			return true
		}
	}
	return false
}

func (n *node) logJSON() string {
	parts := make([]string, len(n.log))
	for i, v := range n.log {
		parts[i] = strconv.Itoa(v)
	}
	return "{\"log\":[" + strings.Join(parts, ",") + "]}\n"
}

// emit reports the log in memory (fd 3).
func (n *node) emit() {
	n.state.WriteString(n.logJSON())
}

// persist appends v to the file, fsyncs it and reports the disk (fd 193).
func (n *node) persist(v int) error {
	if _, err := fmt.Fprintf(n.file, "%d\n", v); err != nil {
		return err
	}
	if err := n.file.Sync(); err != nil {
		return err
	}
	n.durable.WriteString(n.logJSON())
	return nil
}

func open(addr string) *node {
	n := &node{addr: addr, state: os.NewFile(3, "state"), durable: os.NewFile(193, "durable")}
	if data, err := os.ReadFile("log"); err == nil {
		for _, line := range strings.Fields(string(data)) {
			if v, err := strconv.Atoi(line); err == nil {
				n.log = append(n.log, v)
			}
		}
	}
	f, err := os.OpenFile("log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gokv:", err)
		os.Exit(1)
	}
	n.file = f
	n.emit()
	n.durable.WriteString(n.logJSON())
	return n
}

// forward sends v to the backup and waits for its ACK; with n.mu held.
func (n *node) forward(v int) bool {
	if n.backup == nil {
		return false
	}
	if _, err := fmt.Fprintf(n.backup, "PUT %d\n", v); err == nil {
		if line, err := n.acks.ReadString('\n'); err == nil && line == fmt.Sprintf("ACK %d\n", v) {
			return true
		}
	}
	n.backup.Close()
	n.backup = nil
	return false
}

func (n *node) dial() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.redial()
}

// redial opens the connection to the backup if it is down; with n.mu held.
func (n *node) redial() {
	if n.backup != nil {
		return
	}
	if c, err := net.Dial("tcp", n.addr); err == nil {
		n.backup, n.acks = c, bufio.NewReader(c)
	}
}

// forwardTries bounds the connections tried for one PUT, so that a checker that
// crashes the backup again and again still has a finite search.
const forwardTries = 3

// replicate forwards v, on a new connection when the backup connection is down or
// breaks; with n.mu held.
func (n *node) replicate(v int) bool {
	for try := 0; try < forwardTries; try++ {
		n.redial()
		if n.forward(v) {
			return true
		}
	}
	return false
}

// put is the primary's PUT: the reply line, or "" for none (the backup cannot be
// reached: the client's connection is closed).
func (n *node) put(v int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.has(v) {
		return fmt.Sprintf("ACK %d\n", v)
	}
	if ackBeforeBackup {
		n.log = append(n.log, v)
		n.emit()
		go func() { // the rest happens after the client was told
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.forward(v) {
				n.persist(v)
			}
		}()
		return fmt.Sprintf("ACK %d\n", v)
	}
	if !n.replicate(v) {
		return ""
	}
	if err := n.persist(v); err != nil {
		return ""
	}
	n.log = append(n.log, v)
	n.emit()
	return fmt.Sprintf("ACK %d\n", v)
}

// store is the backup's PUT.
func (n *node) store(v int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.has(v) {
		if err := n.persist(v); err != nil {
			return ""
		}
		n.log = append(n.log, v)
		n.emit()
	}
	return fmt.Sprintf("ACK %d\n", v)
}

func serve(c net.Conn, handle func(int) string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		var v int
		if _, err := fmt.Sscanf(line, "PUT %d", &v); err != nil {
			continue
		}
		reply := handle(v)
		if reply == "" {
			return // not done: tell the client by closing, not by silence
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gokv INDEX PRIMARY_ADDR BACKUP_ADDR")
		os.Exit(2)
	}
	primary := os.Args[1] == "0"
	listen, other := os.Args[2], os.Args[3]
	if !primary {
		listen, other = other, listen
	}
	n := open(other)
	l, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gokv:", err)
		os.Exit(1)
	}
	handle := n.store
	if primary {
		handle = n.put
		n.dial()
		go func() {
			for range time.NewTicker(time.Second).C {
				n.dial()
			}
		}()
	}
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "gokv:", err)
			os.Exit(1)
		}
		go serve(c, handle)
	}
}
