#!/usr/bin/env bash
# Starts a local 3-node cluster, packs a sample dataset, runs three trainers
# through two passes, and stops the cluster. Used by "make demo".
# FAILOVER=1 slows the trainers down (-step), kills the leader with SIGKILL
# once pass 0 is under way, and shows the trainers carry on and the killed
# node rejoin.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=bin/raftmaster
DATA=data/demo
PORTS=(18101 18102 18103)
ADDRS=$(printf '127.0.0.1:%s,' "${PORTS[@]}"); ADDRS=${ADDRS%,}

rm -rf "$DATA" && mkdir -p "$DATA"
echo "== packing a sample dataset"
seq 1 30000 | sed 's/^/sample record /' > "$DATA/sample.txt"
$BIN recordio pack --out "$DATA/train-%03d.recordio" --records-per-file 5000 --max-chunk-size 8192 "$DATA/sample.txt" >/dev/null
$BIN recordio inspect "$DATA"/train-*.recordio

echo "== starting a local 3-node cluster (logs in $DATA/cluster.log)"
$BIN local --data-dir "$DATA/cluster" --raft-port 17101 --http-port "${PORTS[0]}" -- --chunks-per-task 2 >"$DATA/cluster.out" 2>"$DATA/cluster.log" &
CLUSTER=$!
trap 'kill -TERM $CLUSTER 2>/dev/null; wait $CLUSTER 2>/dev/null || true' EXIT
for p in "${PORTS[@]}"; do $BIN health --addr "127.0.0.1:$p" --wait 60s; done

if [ "${FAILOVER:-}" != 1 ]; then
  echo "== running 3 trainers through 2 passes"
  go run ./examples/trainer -addrs "$ADDRS" -dataset "$DATA/train-*.recordio" -trainers 3 -passes 2
else
  echo "== running 3 trainers through 2 passes, 200us a record"
  go build -o bin/demo-trainer ./examples/trainer
  bin/demo-trainer -addrs "$ADDRS" -dataset "$DATA/train-*.recordio" -trainers 3 -passes 2 -step 200us | tee "$DATA/trainers.out" &
  TRAINERS=$!
  trap 'kill $TRAINERS 2>/dev/null; kill -TERM $CLUSTER 2>/dev/null; wait $CLUSTER 2>/dev/null || true' EXIT
  until grep -q 'pass 0: 2000 records' "$DATA/trainers.out" 2>/dev/null; do sleep 0.1; done
  LEADER=$($BIN cluster inspect --addr "$ADDRS" | awk '/Leader \*/ { split($1, id, "~"); print id[1] }')
  echo "== killing the leader, $LEADER (SIGKILL), mid-pass"
  pkill -KILL -f -- "--node-id $LEADER --data-dir $PWD/$DATA/cluster/$LEADER "
  wait $TRAINERS
  echo "== what raftmaster local said (from $DATA/cluster.log)"
  grep -A4 "node $LEADER exited" "$DATA/cluster.log"
  echo "== restarting $LEADER with that command"
  RESTART=$(grep -A2 "node $LEADER exited" "$DATA/cluster.log" | tail -1)
  sh -c "exec $RESTART" >"$DATA/$LEADER.restarted.log" 2>&1 &
  NODE=$!
  trap 'kill -TERM $NODE $CLUSTER 2>/dev/null; wait $NODE $CLUSTER 2>/dev/null || true' EXIT
  $BIN health --addr "$(echo "$ADDRS" | cut -d, -f"${LEADER#n}")" --wait 60s
fi

echo "== cluster state"
$BIN cluster inspect --addr "127.0.0.1:${PORTS[0]}"
