#!/bin/sh
# GPU driver upgrade, from a bastion (run from the repository's root).
# 5 % of the GPU nodes first (at least one), then 25 %, then the rest, with an
# hour's soak after each wave; each node drained before its Job, at most 10 %
# of the pool out of service at once. A node counts as done only once the GPU
# operator's validator pod on it is Ready again after the Job. Prometheus is
# asked before every Job start and through each soak: a pod in the GPU
# operator's namespace unready for 15 minutes straight (longer than a validator
# takes to come back after its node's upgrade: the rollout's own restarts must
# not pause it), or a GPU alert firing, pauses the rollout until a
# person lifts the pause by removing the pause file (`job-dispatcher status`
# says why it paused). The query reads kube-state-metrics' series: without
# kube-state-metrics the run refuses to start (a gate series that does not
# exist is no answer, never "healthy").
job-dispatcher -n gpu-operator --job-template examples/gpu-driver-upgrade/driver.yaml \
  --node-selector nvidia.com/gpu.present=true \
  --drain --delete-emptydir-data --drain-timeout-secs 600 --uncordon-on-failure \
  --waves 5%,25%,100% --wave-soak-secs 3600 --max-unavailable 10% \
  --verify-pod-selector app=nvidia-operator-validator --verify-timeout-secs 600 \
  --gate-prometheus-url http://prometheus-k8s.monitoring:9090 \
  --gate-query 'sum(min_over_time(kube_pod_status_ready{namespace="gpu-operator",condition="false"}[15m])) > 0' \
  --gate-alerts 'GPU.*|DCGM.*|KubeNodeNotReady' --on-gate-breach pause \
  --pause-file /var/tmp/gpu-driver-570.pause \
  --max-failures 1 --report gpu-driver-570.json
