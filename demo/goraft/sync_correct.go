//go:build !bug

package main

// The leader counts its own copy of a new entry toward the majority only once the
// entry is on its disk (fsynced).
const countBeforeSync = false
