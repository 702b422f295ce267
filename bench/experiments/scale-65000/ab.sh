#!/bin/bash
# The session's interleaved runs: base.js is `deno task bundle` at ad881e3, after1.js at
# d9c71d6 (node slimming and the memory warning), both copied aside before the runs.
cd /work/wt-perf
run() { # entry nodes extra
  echo "== $1 n=$2 $(date -u +%T)"
  JOB_DISPATCHER_ENTRY=/tmp/perf/$1.js deno run --allow-all bench/memory.ts --nodes $2 $3 2>&1 | grep "RESULT\|anonymous"
}
for i in 1 2 3; do run base 1000; run after1 1000; done
for i in 1 2 3; do run base 10000 --arg=--kube-api-qps=0; run after1 10000 --arg=--kube-api-qps=0; done
