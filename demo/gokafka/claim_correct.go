//go:build !bug

package main

import "gobroadcast/msgloop"

// claim: the request to lin-kv that makes key's tags `tags` if they are still `was`: a
// compare-and-set, which fails (error 22) when another send took the offset first.
func claim(key string, was, tags []string) msgloop.Fields {
	return msgloop.Fields{"type": "cas", "key": key, "from": was, "to": tags,
		"create_if_not_exists": true}
}
