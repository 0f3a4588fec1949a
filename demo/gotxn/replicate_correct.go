//go:build !bug

package main

import "sort"

// batches: what a txn's writes are sent to the other nodes as, one message each. A
// correct node sends one: the last value the txn wrote on each key, in key order,
// which the receiver applies at once.
func batches(writes []write) [][]write {
	last := map[int]int{}
	for _, w := range writes {
		last[w.Key] = w.Value
	}
	net := []write{}
	for k, v := range last {
		net = append(net, write{k, v})
	}
	sort.Slice(net, func(i, j int) bool { return net[i].Key < net[j].Key })
	return [][]write{net}
}
