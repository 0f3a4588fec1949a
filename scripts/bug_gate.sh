#!/usr/bin/env bash
# The bug gate (docs/demos.md, "The bug gate"): every demo in demo/ has a planted bug
# behind #ifdef BUG. Build every demo both ways, run cmc on each model: the correct
# build must exit 0 with no finding of vacuity (it runs with --strict: every client
# connected, every property held for a reason somewhere; docs/cmc.md, "Coverage and
# vacuity"), the bug build must exit 1 naming the expected property. Prints a table and
# ends with the line `N passed, M failed`; exits non-zero when anything failed.
#
#   scripts/bug_gate.sh                 every demo
#   scripts/bug_gate.sh relay lease     only these
#   CMC="cmc" scripts/bug_gate.sh       another cmc command (default: python3 -m cmc)
#   CMC="python3 -m cmc --no-fast" scripts/bug_gate.sh   every world replayed
#   BUILDS=bug scripts/bug_gate.sh      only the bug builds (CI's replayed gate: the slow
#                                       tests compare each correct build copied and replayed)
#   CMC="python3 -m cmc --por" scripts/bug_gate.sh       reduced (test_por.py compares the
#                                       verdicts and counterexample lengths with the full run)
#   COVERAGE=1 scripts/bug_gate.sh      also print each correct build's coverage lines
#                                       (docs/demos.md, "Coverage of the correct builds")
set -u

cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
CMC=${CMC:-python3 -m cmc}
BUILDS=${BUILDS:-correct bug}

# demo  model file  property the bug build must violate  [program, if not the demo's]
GATE="
durlog  models/durlog.model  no_lost_commit
relay   models/relay.model   no_lost_message
lease   models/lease.model   one_leader
twopc   models/twopc.model   commit_is_final
raft    models/raft.model    election_safety
tlog    models/tlog.model    no_lost_commit
gokv    models/gokv.model    no_lost_commit
gogossip models/gogossip.model versions_never_decrease
prefork models/prefork.model unique_ids
bgsave  models/bgsave.model  no_lost_write
durlog-wrap models/durlog-wrap.model no_lost_commit durlog
appendkv models/appendkv.model no_lost_write
swapstate models/swapstate.model no_lost_write
reclog  models/reclog.model  only_written_values
pbkv    models/pbkv.model    kv_is_linearizable
register models/register.model register_is_linearizable
leaseread models/leaseread.model no_stale_read
goraft  models/goraft.model  acked_on_majority
maelstrom-echo       models/maelstrom/echo.model       echoed
maelstrom-unique-ids models/maelstrom/unique-ids.model unique
maelstrom-broadcast  models/maelstrom/broadcast.model  final_read_has_every_ack
maelstrom-g-counter  models/maelstrom/g-counter.model  final_read_counts_every_ack
maelstrom-lin-kv     models/maelstrom/lin-kv.model     kv_is_linearizable
maelstrom-g-set      models/maelstrom/g-set.model      final_reads_have_every_ack
maelstrom-pn-counter models/maelstrom/pn-counter.model final_reads_count_every_ack
maelstrom-raft-kv    models/maelstrom/raft-kv.model    kv_is_linearizable
maelstrom-unique-ids-perl models/maelstrom/unique-ids-perl.model unique
maelstrom-echo-js    models/maelstrom/echo-js.model    echoed
gobroadcast models/gobroadcast.model final_read_has_every_ack
maelstrom-kafka      models/maelstrom/kafka.model      offsets_are_unique
maelstrom-txn-rw-register models/maelstrom/txn-rw-register.model txns_are_strict_serializable
maelstrom-txn-list-append models/maelstrom/txn-list-append.model txns_are_strict_serializable
gotxn   models/gotxn.model   txns_are_read_committed
gokafka models/gokafka.model polls_agree_with_sends
jregister models/jregister.model register_is_linearizable
"
# jregister is a Java demo (a class directory, built where javac is: demo/Makefile).
# A maelstrom-* demo is a Maelstrom node in demo/maelstrom/ (docs/maelstrom.md), a script:
# its bug build is the same script with --bug (-D flags=--bug).

if ! make -s -C demo >/dev/null; then
    echo "bug gate: building the demos failed (make -C demo)" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bug-gate.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
warnings=""
row() { printf '%-11s %-7s %-32s %-32s %9s %9s %6s %6s %8s  %s\n' "$@"; }
row demo build expected got generated distinct depth trace seconds result
row ------ ----- -------- --- --------- -------- ----- ----- ------- ------

while read -r demo model prop prog; do
    [ -z "$demo" ] && continue
    prog=${prog:-$demo}
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$demo"; then
        continue
    fi
    maelstrom=false
    case $demo in maelstrom-*) maelstrom=true ;; esac
    if ! $maelstrom && [ ! -x "demo/build/$prog" ]; then     # no Go toolchain, or no JDK
        row "$demo" "-" "built" "not built (no go/javac)" - - - - SKIP
        continue
    fi
    for build in $BUILDS; do
        args=(--model-file "$model")
        expected="exit 0"
        if [ "$build" = bug ]; then
            if $maelstrom; then
                args+=(-D "flags=--bug" --trace-out "$tmp/$demo.trace.json")
            else
                args+=(-D "bin=../demo/build/$prog-bug" --trace-out "$tmp/$demo.trace.json")
            fi
            expected="exit 1: $prop"
        else
            args+=(--strict)          # a correct build: no vacuity either
        fi
        start=$(date +%s%N)
        # shellcheck disable=SC2086  # CMC may be a command with arguments
        $CMC "${args[@]}" >"$tmp/out" 2>"$tmp/err" </dev/null
        status=$?
        end=$(date +%s%N)
        seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')

        got="exit $status"
        violated=$(sed -n -E 's/^Error: (Invariant|Action property|Quiescent property|Temporal property|Linearizability property|Transactional property) ([A-Za-z_0-9]+) (is|was) violated\.$/\2/p; s/^Error: Witness ([A-Za-z_0-9]+) was never reached\.$/\1/p' "$tmp/out" | head -n 1)
        [ -n "$violated" ] && got="$got: $violated"
        if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
            err=$(grep -m 1 '^Error:' "$tmp/out" || tail -n 1 "$tmp/err")
            warnings="$warnings$demo ($build): $err"$'\n'
        fi

        # (with --por the line says "N states generated (reduced by --por), ...")
        generated=$(sed -n -E 's/^([0-9]+) states generated( \(reduced by --por\))?, ([0-9]+) distinct states found.*/\1/p' "$tmp/out")
        distinct=$(sed -n -E 's/^([0-9]+) states generated( \(reduced by --por\))?, ([0-9]+) distinct states found.*/\3/p' "$tmp/out")
        # the counterexample's length: its states, the initial one included
        trace=-
        if [ "$build" = bug ] && [ -s "$tmp/$demo.trace.json" ]; then
            trace=$(python3 -c 'import json, sys; print(1 + len(json.load(open(sys.argv[1]))["actions"]))' "$tmp/$demo.trace.json")
            rm -f "$tmp/$demo.trace.json"
        fi
        depth=$(sed -n -E 's/^The depth of the complete state graph search is ([0-9]+)\.$/\1/p' "$tmp/out")

        if [ "$got" = "$expected" ]; then
            result=PASS
            passed=$((passed + 1))
        else
            result=FAIL
            failed=$((failed + 1))
            # what the run said last: a traceback, an error line
            warnings="$warnings$demo ($build): $got, where $expected was expected; it ended with:"$'\n'
            warnings="$warnings$( { tail -n 5 "$tmp/out"; tail -n 25 "$tmp/err"; } | sed 's/^/    /')"$'\n'
        fi
        row "$demo" "$build" "$expected" "$got" "${generated:--}" "${distinct:--}" \
            "${depth:--}" "$trace" "$seconds" "$result"
        if [ "${COVERAGE:-}" = 1 ] && [ "$build" = correct ]; then
            sed -n '/^Coverage:/,/^Finished in/p' "$tmp/out" | sed '$d'
        fi

        left=$(ps -ww -eo args= | grep -c "^$ROOT/demo/build/$demo[ -]")
        if [ "$left" -gt 0 ]; then     # give an exiting process a moment, then look again
            sleep 1
            left=$(ps -ww -eo args= | grep -c "^$ROOT/demo/build/$demo[ -]")
        fi
        if [ "$left" -gt 0 ]; then
            warnings="${warnings}$demo ($build): $left node process(es) still running after the check"$'\n'
        fi
    done
done <<< "$GATE"

if [ -n "$warnings" ]; then
    echo
    printf '%s' "$warnings"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
