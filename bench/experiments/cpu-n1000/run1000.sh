#!/bin/bash
# One N=1000, P=100, D=10 s watch run of `deno task bench` (bench/experiments/cpu-n1000.md).
# usage: run1000.sh LABEL TREE ENTRY [V8FLAGS]: TREE's bench (and its deno.json's V8 flags)
# runs the bundle ENTRY; the run's JSON goes to $OUT/LABEL, per-thread CPU (threads.sh) and
# the bench's result line to $OUT (default /tmp/cpuwork).
label=$1; tree=$2; entry=$3; flags=$4
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/cpuwork}
mkdir -p "$out"
cd "$tree" || exit 1
("$here/threads.sh" "$out/threads-$label.txt" &)
env BENCH_PROFILE=full BENCH_N=1000 BENCH_P=100 BENCH_D=10 BENCH_MODES=watch BENCH_STARTUP_RUNS=1 \
  ${flags:+BENCH_V8_FLAGS=$flags} JOB_DISPATCHER_ENTRY="$entry" BENCH_OUT="$out/$label" \
  deno task bench >"$out/$label.log" 2>&1
grep "exit " "$out/$label.log" | sed "s/^/$label: /" >>"$out/summary.txt"
