"""Linux as cmc meets it: the x86_64 ABI (flag values, the generated syscall table,
struct sockaddr), the seccomp filter, the C helper (`_native`, the only module that
touches cffi) and the one reader of /proc (`procfs`). Imports nothing else of the
kernel."""
