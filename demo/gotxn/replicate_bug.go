//go:build bug

package main

// batches: the bug build sends each write as its own message, in the order the txn
// made them, so a peer applies an intermediate value, one the txn later overwrote, and
// may show it to a read before the next message comes (G1b).
func batches(writes []write) [][]write {
	each := [][]write{}
	for _, w := range writes {
		each = append(each, []write{w})
	}
	return each
}
