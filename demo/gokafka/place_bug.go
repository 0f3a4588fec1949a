//go:build bug

package main

import "encoding/json"

// place: the bug build keeps a replicated message at the end of the follower's log, as
// if replicates came in the order the leader sent them: one that overtakes another (or
// follows a lost one) sits at the wrong offset, and a poll there answers a message at
// an offset the leader acknowledged for another.
func place(log map[int]json.RawMessage, offset int) int { return len(log) }
