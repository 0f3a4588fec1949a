//go:build bug

package main

// resend: the bug build sends each gossip once, and never again.
const resend = false
