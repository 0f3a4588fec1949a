#!/bin/sh
# durlog-wrap: start a durlog build as a child of this shell, the way a wrapper or init
# script does when it does not end in `exec` (docs/target-contract.md, "Process trees"):
# the node is then a process tree, this shell blocked in wait4 and durlog under it, and
# a CRASH kills both and runs this script again. models/durlog-wrap.model checks durlog
# through it, with the same verdicts and counts as models/durlog.model.
#
#     durlog-wrap.sh PROGRAM INDEX PRIMARY_ADDR BACKUP_ADDR
#     e.g.  durlog-wrap.sh ../demo/build/durlog 0 127.0.0.1:7000 127.0.0.1:7001
#
# A relative PROGRAM is taken from this script's folder, not from the working directory
# (a node's is a fresh, empty one). ../demo/build/durlog names the same file from demo/
# as from models/, so the model's -D bin=../demo/build/durlog-bug works as for durlog.
# Only builtins here: the one fork is durlog's.
case $0 in
    */*) here=${0%/*} ;;
    *) here=. ;;
esac
if [ $# -lt 1 ]; then
    echo "usage: durlog-wrap.sh PROGRAM ARGS..." >&2
    exit 2
fi
case $1 in
    /*) prog=$1 ;;
    *) prog=$here/$1 ;;
esac
shift
"$prog" "$@"
exit $?
