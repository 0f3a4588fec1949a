//go:build bug

package main

// The planted defect (-tags bug): the leader writes a new entry to its file and
// counts its own copy toward the majority at once, without an fsync. One follower's
// ack then commits it and the client is told OK while the entry is on one disk only:
// a crash of the leader loses the leader's copy.
const countBeforeSync = true
