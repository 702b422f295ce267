#!/bin/bash
# Interleaved before/after of bench:memory (bench/experiments/memory-65000.md).
# usage: ab.sh N RUNS [dispatcher flags…]; $BASE and $HEAD name the two bundles.
# Each line: the time, the build, the bench's RESULT line.
n=$1; runs=$2; shift 2
for i in $(seq 1 "$runs"); do
  for b in "$HEAD" "$BASE"; do
    r=$(JOB_DISPATCHER_ENTRY=$b deno task bench:memory --nodes "$n" "$@" 2>&1 | grep -E "^RESULT|^status|^timeline")
    echo "$(date -u +%H:%M:%S) $(basename "$b" .js) $r"
  done
done
