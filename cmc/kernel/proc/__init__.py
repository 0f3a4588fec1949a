"""Running and copying a node's processes: the node (launch, kill, clocks, state
lines), its scheduler (the notification loop: threads and processes one at a time
until the node is quiescent), its threads and processes as cmc tracks them, and
copying a world by lending and forking its nodes (`fork`). Stands on `calls`,
`world` and `linux`; only `cluster` imports it."""
