"""The call handlers: what cmc answers each notified system call with, one module
per kind of call (sockets and streams, datagrams, descriptors, waits, files, shared
memory, threads and processes, time, limits), and `dispatch`, which finds each call's
handler by the name its row gives (linux/syscalls.py). A handler sees the world
(`world`) and Linux (`linux`), and the node only through the `Call` it is given: it
never imports how a node is run."""
