#!/bin/bash
# usage: ctx.sh OUT: waits for the measured run's process; keeps its main thread's
# voluntary/involuntary context switches and utime/stime as last seen before exit.
out=$1; pid=""
while [ -z "$pid" ]; do pid=$(pgrep -f -- "--job-template .*bench-d[0-9]+.yaml --namespace" | head -1); sleep 0.2; done
while [ -d /proc/$pid ]; do
  s=$(grep ctxt /proc/$pid/task/$pid/status 2>/dev/null | tr '\n' ' '); t=$(sed 's/.*) //' /proc/$pid/task/$pid/stat 2>/dev/null | awk '{print "utime", $12, "stime", $13}')
  [ -n "$s" ] && echo "$s $t" > $out.last
  sleep 0.5
done
echo "pid $pid $(cat $out.last)" >> $out
