"""The objects of a world, as cmc keeps them: the emulated network (connections,
channels, virtual sockets, datagrams), the disk model and file contents, the ghost
clients, and the actions the environment may take. Stands on `linux` only: nothing
here runs a process or answers a call."""
