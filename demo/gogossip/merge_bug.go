//go:build bug

package main

// The planted defect (-tags bug): an entry gossiped by a peer replaces the node's own
// view of that member whatever its version (last writer wins, in arrival order), so a
// stale heartbeat that arrives after a fresh one takes the member back in time.
const lastWriterWins = true
