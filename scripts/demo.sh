#!/usr/bin/env bash
# Starts a local 3-node cluster, packs a sample dataset, runs three trainers
# through two passes, and stops the cluster. Used by "make demo".
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

echo "== running 3 trainers through 2 passes"
go run ./examples/trainer -addrs "$ADDRS" -dataset "$DATA/train-*.recordio" -trainers 3 -passes 2

echo "== cluster state"
$BIN cluster inspect --addr "127.0.0.1:${PORTS[0]}"
