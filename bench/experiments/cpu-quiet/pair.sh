#!/bin/bash
# usage: pair.sh N P D LABEL:ENTRY ... ; runs each in order from /work/main's bench
n=$1; p=$2; d=$3; shift 3
cd /work/main
for spec in "$@"; do
  label=${spec%%:*}; entry=${spec#*:}
  echo "$(date +%T) start $label load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/cpuwork/s27/summary.txt
  env BENCH_PROFILE=full BENCH_N=$n BENCH_P=$p BENCH_D=$d BENCH_MODES=watch BENCH_STARTUP_RUNS=1 \
    JOB_DISPATCHER_ENTRY="$entry" BENCH_OUT=/tmp/cpuwork/s27/$label \
    npx -y deno@2.9.6 task bench > /tmp/cpuwork/s27/$label.log 2>&1
  grep "exit \|status " /tmp/cpuwork/s27/$label.log | head -1 | sed "s/^/$label: /" >> /tmp/cpuwork/s27/summary.txt
  git checkout -q bench/results.md
done
