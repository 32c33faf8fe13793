#!/usr/bin/env bash
# Runs N vlmload shards as local processes against the same target and merges their results: the
# steps of tools/k8s/README.md, on one machine.
#
#   tools/shards.sh N OUTDIR [vlmload options...]
#
# Each shard i writes OUTDIR/shard-i.{json,histograms.json,timeline.csv,requests.jsonl}; the merge
# writes OUTDIR/merged.json and OUTDIR/merged-timeline.csv. --rate and --concurrency are totals for
# all shards together.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: tools/shards.sh N OUTDIR [vlmload options...]" >&2
  exit 2
fi
n=$1 out=$2
shift 2
case $n in '' | *[!0-9]* | 0) echo "tools/shards.sh: N must be a positive number" >&2; exit 2 ;; esac
vlmload=${VLMLOAD:-$(dirname "$0")/../build/vlmload}
mkdir -p "$out"
pids=()
for ((i = 0; i < n; i++)); do
  "$vlmload" "$@" --shard "$i/$n" --quiet \
    --output "$out/shard-$i.json" --histograms "$out/shard-$i.histograms.json" \
    --timeline "$out/shard-$i.timeline.csv" --log-requests "$out/shard-$i.requests.jsonl" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=$?
done
inputs=()
for ((i = 0; i < n; i++)); do inputs+=("$out/shard-$i.histograms.json"); done
"$vlmload" merge "$out/merged.json" "${inputs[@]}" --timeline "$out/merged-timeline.csv"
echo "merged $n shards: $out/merged.json, $out/merged-timeline.csv"
exit $status
