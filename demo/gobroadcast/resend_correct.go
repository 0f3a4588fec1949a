//go:build !bug

package main

// resend: a gossip not acknowledged is sent again every second.
const resend = true
