#!/bin/sh
# initdb.sh DIR: make a PostgreSQL 15 data directory at DIR, once (the build line of
# test/models/postgres*.model runs it before checking). Trust authentication, and a
# superuser role whose name ends in a newline, "cmc\n": PostgreSQL reports the session's
# role name in its answer to the startup message (ParameterStatus
# session_authorization), and that newline is what ends the reply line cmc's ghost
# client reads, so that it sends its next request (docs/model-file.md, `client`).
#
# As root the server programs run as the user postgres (PostgreSQL refuses root) with
# CAP_DAC_READ_SEARCH, so that they reach DIR through folders only root may enter
# (pytest's tmp_path, cmc's scratch directory); the wrapper postgres-node.sh does the same.
#
# WAL segments of 1 MB (not 16): the node copies the directory at its first launch, and
# every world keeps what its node wrote (docs/cmc.md, "Memory").
set -eu
dir=$1
[ -f "$dir/PG_VERSION" ] && [ -f "$dir.ready" ] && exit 0
bin=/usr/lib/postgresql/15/bin
if [ "$(id -u)" = 0 ]; then
    as_pg() { setpriv --reuid=postgres --regid=postgres --clear-groups \
                  --inh-caps=+dac_read_search --ambient-caps=+dac_read_search "$@"; }
    owner=postgres:postgres
else
    as_pg() { "$@"; }
    owner=$(id -u):$(id -g)
fi
rm -rf "$dir" "$dir.ready"
mkdir -p "$dir"
chown "$owner" "$dir"
as_pg "$bin/initdb" -D "$dir" -A trust -U postgres -E UTF8 --locale=C --no-sync \
    --wal-segsize=1 >"$dir.log" 2>&1
printf '%s\n' 'CREATE ROLE U&"cmc\000A" SUPERUSER LOGIN;' |
    as_pg "$bin/postgres" --single -D "$dir" -c fsync=off postgres >>"$dir.log" 2>&1
if grep -q "ERROR" "$dir.log"; then
    cat "$dir.log" >&2
    exit 1
fi
touch "$dir.ready"
