#!/bin/bash
# usage: threads.sh OUTFILE: waits for a measured dispatcher run of `deno task bench` and keeps
# each of its threads' utime and stime (clock ticks) as last seen before it exited: V8's
# --cpu-prof samples only the main thread, and its own sampler thread costs CPU too.
out=$1
pid=""
while [ -z "$pid" ]; do
  pid=$(pgrep -f -- "--job-template .*bench-d[0-9]+.yaml --namespace" | head -1)
  sleep 0.5
done
echo "pid $pid" >"$out"
while [ -d "/proc/$pid" ]; do
  snap=""
  for t in /proc/"$pid"/task/*; do
    s=$(cat "$t/stat" 2>/dev/null) || continue
    name=$(cat "$t/comm" 2>/dev/null)
    ut=$(echo "$s" | sed 's/.*) //' | awk '{print $12, $13}')
    snap+="$(basename "$t") $name $ut"$'\n'
  done
  [ -d "/proc/$pid" ] && echo "$snap" >"$out.last"
  sleep 1
done
cat "$out.last" >>"$out"
