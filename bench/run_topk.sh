#!/bin/sh
# Runs every top-k benchmark case (bench/topk.cpp) in its own process, so each case's
# peak_RSS_MB is its own peak, not the largest case's so far. Needs a quiet machine.
#   bench/run_topk.sh [path/to/mqalogits_bench] [output directory] [extra benchmark flags...]
set -eu
BIN=${1:-build-perf/bench/mqalogits_bench}
OUT=${2:-topk-results}
[ $# -ge 2 ] && shift 2 || shift $#
mkdir -p "$OUT"
i=0
for name in $("$BIN" --benchmark_list_tests --benchmark_filter='^topk/'); do
  i=$((i + 1))
  "$BIN" --benchmark_filter="^${name}\$" --benchmark_repetitions=5 --benchmark_min_time=1 \
    --benchmark_report_aggregates_only=true --benchmark_out_format=json \
    --benchmark_out="$OUT/case$(printf %03d $i).json" "$@"
done
