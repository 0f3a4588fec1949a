//go:build bug

package main

import "gobroadcast/msgloop"

// claim: the bug build writes key's tags whatever they are now: two sends at two nodes
// that read the same tags take the same offset, and one message overwrites the other.
func claim(key string, was, tags []string) msgloop.Fields {
	return msgloop.Fields{"type": "write", "key": key, "value": tags}
}
