#!/bin/bash
# usage: smaps.sh OUT — waits for the dispatcher, dumps anon mappings grouped, every 3 s
out=$1; : > $out
for i in $(seq 1 200); do pid=$(pgrep -f "job-dispatcher-memory-.*/job-dispatcher.js" | head -1); [ -n "$pid" ] && break; sleep 0.2; done
echo "pid $pid" >> $out
while kill -0 $pid 2>/dev/null; do
  t=$(date +%s)
  awk -v t=$t '
   /^[0-9a-f]+-[0-9a-f]+ /{split($1,a,"-"); name=$6; sz=0}
   /^Rss:/{rss=$2; if(name=="") { if (rss>=60000) k="anon>=60M"; else if (rss>=8000) k="anon8-60M"; else if (rss>=1000) k="anon1-8M"; else k="anon<1M"} else k=name; tot[k]+=rss; cnt[k]++}
   END{for(k in tot) if (tot[k]>1000) printf "%s %s %d kB (%d maps)\n", t, k, tot[k], cnt[k]}' /proc/$pid/smaps 2>/dev/null | sort -k3 -n -r >> $out
  grep -E "VmRSS|VmHWM|Threads" /proc/$pid/status >> $out 2>/dev/null
  sleep 3
done
