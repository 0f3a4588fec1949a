//go:build bug

package main

// The planted defect (-tags bug): the primary acknowledges a PUT as soon as it is in
// its memory, before the backup has it and before its own fsync.
const ackBeforeBackup = true
