//go:build !bug

package main

// The primary acknowledges a PUT once the backup has it and it is on the primary's
// own disk.
const ackBeforeBackup = false
