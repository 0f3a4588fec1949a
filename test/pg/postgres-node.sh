#!/bin/sh
# postgres-node.sh DATA PORT [SETTING...]: one PostgreSQL 15 server as a node of cmc.
#
# The node's working directory is fresh and empty at launch: the data directory made by
# initdb.sh at build time is copied into it (./data) the first time, and `sync` makes
# the copy durable, so that a CRASH under `disk fsync` keeps it (cp does not fsync).
# After a CRASH this script runs again in the same directory and finds ./data there,
# with what PostgreSQL made durable: the server starts with crash recovery.
#
# PostgreSQL refuses to run as root: as root the server runs as the user postgres,
# keeping only CAP_DAC_READ_SEARCH so that it reaches ./data by its absolute path
# through cmc's scratch directory (mode 0700, root's). Unmodified otherwise: TCP on
# 127.0.0.1:PORT (cmc's network), the Unix socket in ./data (-k .: the data directory
# is the server's working directory), small memory, no autovacuum, fsync on.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: postgres-node.sh DATA PORT [SETTING...]" >&2
    exit 2
fi
src=$1
port=$2
shift 2
if [ ! -d data ]; then
    cp -a "$src" data
    rm -f data/postmaster.pid data/postmaster.opts
    sync
fi
set -- /usr/lib/postgresql/15/bin/postgres -D data -h 127.0.0.1 -p "$port" -k . \
    -c shared_buffers=128kB -c max_connections=4 -c superuser_reserved_connections=0 \
    -c max_wal_senders=0 -c max_replication_slots=0 -c max_worker_processes=0 \
    -c max_logical_replication_workers=0 -c autovacuum=off -c fsync=on \
    -c dynamic_shared_memory_type=posix \
    "$@"
if [ "$(id -u)" = 0 ]; then
    exec setpriv --reuid=postgres --regid=postgres --clear-groups \
        --inh-caps=+dac_read_search --ambient-caps=+dac_read_search "$@"
fi
exec "$@"
