#!/bin/bash
# usage: rss.sh OUT — beside a bench:memory run: the dispatcher's VmRSS and VmHWM (kB) every 20 ms, epoch ms
out=$1; : > $out
for i in $(seq 1 600); do pid=$(pgrep -f "job-dispatcher-memory-.*/job-dispatcher.js" | head -1); [ -n "$pid" ] && break; sleep 0.1; done
while [ -r /proc/$pid/status ]; do
  echo "$(date +%s%3N) $(awk '/VmRSS|VmHWM/{printf "%s ", $2}' /proc/$pid/status)" >> $out
  sleep 0.02
done
