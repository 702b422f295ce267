#!/bin/sh
# A one-off audit across every node that only reports, from a bastion (run
# from the repository's root). Every node (taints included), no cordon, no
# label, no mark on the nodes; a failing node never stops the others. The
# answer is the report: every node with its outcome (failed: password logins
# allowed). Exit 1 when some node failed the audit.
job-dispatcher -n node-audit --job-template examples/node-audit/audit.yaml \
  --ignore-node-taints --node-records none --max-failures 100% \
  --parallelism 50 --report audit-sshd.html --report-format html
