#!/bin/sh
# Kernel patch and reboot, from a bastion (run from the repository's root),
# inside the weekend maintenance window: no Job starts outside it, and a run
# still going when it closes exits 4 and is simply run again next window (the
# nodes done are skipped). At most 2 nodes of the pool unavailable at once
# (drained, rebooting, or NotReady for any reason), a minute's pause after
# each node, and the run stops starting nodes after 2 failures.
# The reboot comes after the Job's pod exited, while the node still reports
# Ready: a node counts as rebooted only once its kube-proxy pod turned Ready
# again after the Job (--verify-pod-selector; name your CNI agent's pods where
# kube-proxy is replaced, e.g. k8s-app=cilium). Only then is it labelled and
# uncordoned.
job-dispatcher -n node-maintenance --job-template examples/kernel-patch-reboot/kernel.yaml \
  --node-selector node-role.kubernetes.io/worker= \
  --window 'Sat,Sun 01:00-05:00 Europe/Berlin' \
  --drain --delete-emptydir-data --drain-timeout-secs 600 \
  --max-unavailable 2 --parallelism 2 --post-node-delay-secs 60 \
  --node-label-key node.example.com/kernel --node-label 6.8.0-90 --wait-node-ready-secs 900 \
  --verify-pod-selector k8s-app=kube-proxy --verify-timeout-secs 900 \
  --skip-satisfied-nodes --max-failures 2
