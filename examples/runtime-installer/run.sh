#!/bin/sh
# Runtime installer, from a bastion (run from the repository's root).
# install / upgrade: the nodes of the kata pool; each labelled once its Job
# succeeded, it is Ready again and it serves the kata-qemu handler; then the
# start-up taint is lifted. A re-run skips the nodes already done; a node that
# left the pool gets the uninstaller.
job-dispatcher -n kata-system --job-template examples/runtime-installer/install.yaml \
  --node-selector node.example.com/pool=kata \
  --node-label-key katacontainers.io/kata-runtime --node-label true --claim-node-pending \
  --require-node-handlers kata-qemu \
  --remove-node-taints katacontainers.io/kata-not-ready:NoSchedule \
  --skip-satisfied-nodes --cleanup-job-template examples/runtime-installer/uninstall.yaml \
  --parallelism 10

# uninstall: every node this installer touched, claimed or finished.
job-dispatcher -n kata-system --job-template examples/runtime-installer/uninstall.yaml \
  --node-selector katacontainers.io/kata-runtime \
  --node-label-key katacontainers.io/kata-runtime --remove-node-label \
  --ignore-node-taints --parallelism 10
