//go:build !bug

package main

// An entry gossiped by a peer is taken only when its version is higher than the one
// the node has (the merge is the maximum, whatever order the gossip arrives in).
const lastWriterWins = false
