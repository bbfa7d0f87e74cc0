#!/usr/bin/env bash
# The first hour of a new user, on real processes, as the README tells it:
# the quick start on a local cluster (what make run starts), the Go and the
# Python trainer paths, a second dataset that the job does not take, a wrong
# address, and a node killed under the local cluster with the survivors
# serving. Each step checks what the user is told, and the script fails at
# the first step that does not hold. Used by "make first-hour".
#
# FIRST_HOUR_PORT (default 18301) is the API port of n1; the cluster uses it
# and the next two, and the Raft ports 1000 below. PYTHON is the interpreter
# of the Python path (default: Debian's /usr/bin/python3 when present).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN=$REPO/bin/raftmaster
PORT=${FIRST_HOUR_PORT:-18301}
ADDRS="127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/raftmaster-first-hour.XXXXXX")
CLUSTER=

step() { printf '\n== %s\n' "$*"; }
fail() {
	printf 'first-hour: FAILED: %s\n' "$*" >&2
	for f in "$WORK"/*.out "$WORK"/*.err; do
		[ -s "$f" ] && { printf -- '--- %s (last 30 lines)\n' "$f" >&2; tail -n 30 "$f" >&2; }
	done
	exit 1
}
# expect FILE PATTERN WHAT: FILE must contain PATTERN (extended regexp).
expect() { grep -Eq -- "$2" "$1" || fail "$3: no /$2/ in $1"; }
stop() {
	if [ -n "$CLUSTER" ]; then
		kill -TERM "$CLUSTER" 2>/dev/null || true
		wait "$CLUSTER" 2>/dev/null || true
	fi
	pkill -TERM -f -- "--data-dir $WORK/" 2>/dev/null || true
	if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; fi
}
trap stop EXIT

cd "$REPO"
step "build (make build)"
make -s build >/dev/null

cd "$WORK"
step "make run: a local 3-node cluster on $ADDRS"
"$BIN" local --nodes 3 --data-dir data --http-port "$PORT" --raft-port $((PORT - 1000)) >local.out 2>local.err &
CLUSTER=$!
for a in ${ADDRS//,/ }; do
	"$BIN" health --addr "$a" --wait 60s >/dev/null || fail "node $a did not become healthy"
done
deadline=$((SECONDS + 60))
until grep -q "local cluster ready" local.out; do
	[ $SECONDS -lt $deadline ] || fail "raftmaster local did not say it is ready"
	sleep 0.2
done

step "quick start: cluster inspect, recordio pack and inspect, dataset set"
"$BIN" cluster inspect --addr "127.0.0.1:$PORT" | tee inspect.out
expect inspect.out 'Leader' "cluster inspect names the leader"
seq 1 100000 | "$BIN" recordio pack --out 'data/train-%03d.recordio' --records-per-file 25000 | tee pack.out
"$BIN" recordio inspect data/train-*.recordio | tee rinspect.out
expect rinspect.out '100000' "recordio inspect counts the 100,000 records"
"$BIN" dataset set --addr "127.0.0.1:$((PORT + 1))" "$WORK/data/train-*.recordio" | tee set.out

step "a second dataset for the same job is not taken, and the user is told"
mkdir -p data/demo
seq 1 30000 | "$BIN" recordio pack --out 'data/demo/train-%03d.recordio' --records-per-file 5000 >/dev/null
"$BIN" dataset set --addr "$ADDRS" "$WORK/data/demo/train-*.recordio" >ignored.out 2>&1 || true
cat ignored.out
expect ignored.out 'ignored' "a dataset that differs from the job's says it is ignored"
expect ignored.out "data/train-\\*\\.recordio" "the ignored answer names the job's current patterns"
"$BIN" job inspect --addr "$ADDRS" default | tee jinspect.out
expect jinspect.out "data/train-\\*\\.recordio" "job inspect shows the job's patterns"
expect jinspect.out '[Ff]iles' "job inspect shows the file count"

step "the Go path: examples/trainer on its own job reads exactly its 30,000 records per pass"
(cd "$REPO" && go run ./examples/trainer -addrs "$ADDRS" -job first-hour-go \
	-dataset "$WORK/data/demo/train-*.recordio" -trainers 3 -passes 2) >go.out 2>go.err || fail "examples/trainer failed"
tail -n 3 go.out
expect go.out 'read 60000 records in 2 passes' "the Go trainers read 2 passes of 30,000 records"

step "the Python path: make python-env, then examples/python/train.py"
(cd "$REPO" && make -s python-env VENV="$WORK/venv" ${PYTHON:+PYTHON=$PYTHON}) >venv.out 2>&1 || fail "make python-env failed"
"$WORK/venv/bin/python" -c 'import raftmaster' || fail "raftmaster does not import in the venv make python-env made"
if "$WORK/venv/bin/python" -c 'import torch' 2>/dev/null; then
	"$WORK/venv/bin/python" "$REPO/examples/python/train.py" --addrs "$ADDRS" --epochs 2 >py.out 2>py.err ||
		fail "examples/python/train.py failed"
	tail -n 3 py.out
else
	"$WORK/venv/bin/python" "$REPO/examples/python/train.py" --addrs "$ADDRS" >py.out 2>py.err && fail "train.py ran without torch"
	expect py.err 'needs PyTorch' "train.py without torch says how to get it"
	echo "(torch is not importable here: train.py said how to get it)"
fi

step "a wrong address fails fast, naming the address"
closed=$((PORT + 50))
start=$SECONDS
if "$BIN" cluster inspect --addr "127.0.0.1:$closed" >wrong.out 2>&1; then fail "cluster inspect of a closed port succeeded"; fi
took=$((SECONDS - start))
cat wrong.out
expect wrong.out "127.0.0.1:$closed" "the error names the address it tried"
echo "(failed after ${took}s; the first-contact timeout is 5s)"
[ "$took" -lt 25 ] || fail "the CLI waited ${took}s on a wrong address"
start=$SECONDS
"$WORK/venv/bin/python" - "127.0.0.1:$closed" >pywrong.out 2>&1 <<'EOF' || fail "the Python client did not fail with NoContact"
import sys
import raftmaster
try:
    raftmaster.Client([sys.argv[1]]).status()
except raftmaster.NoContact as e:
    print("NoContact:", e)
else:
    sys.exit("status of a closed port succeeded")
EOF
took=$((SECONDS - start))
cat pywrong.out
expect pywrong.out "127.0.0.1:$closed" "the Python error names the address it tried"
[ "$took" -lt 25 ] || fail "the Python client waited ${took}s on a wrong address"

step "a node killed under the local cluster: the survivors serve"
leader=$("$BIN" cluster inspect --addr "$ADDRS" | awk '/Leader \*/ { split($1, id, "~"); print id[1] }')
[ -n "$leader" ] || fail "cluster inspect did not mark the leader"
echo "killing the leader, $leader (SIGKILL)"
pkill -KILL -f -- "--node-id $leader --data-dir $WORK/data/$leader " || fail "no serve process of $leader"
deadline=$((SECONDS + 60))
until grep -q "restart it by hand" local.err; do
	[ $SECONDS -lt $deadline ] || fail "raftmaster local did not say how to restart $leader"
	sleep 0.2
done
grep -A2 "node $leader exited" local.err
kill -0 "$CLUSTER" 2>/dev/null || fail "raftmaster local exited after one node died"
(cd "$REPO" && go run ./examples/trainer -addrs "$ADDRS" -job first-hour-survivors \
	-dataset "$WORK/data/demo/train-*.recordio" -trainers 2 -passes 1) >survivors.out 2>survivors.err ||
	fail "the trainers failed on the survivors"
expect survivors.out 'read 30000 records in 1 passes' "the survivors serve a whole pass"
tail -n 1 survivors.out

printf '\nfirst-hour: every step held\n'
