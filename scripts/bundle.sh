#!/usr/bin/env bash
# Bundles main.ts and its npm graph into dist/job-dispatcher.js, the payload
# `deno compile` embeds, with the commit stamped in: `deno bundle` has no
# --define, so the entry is a copy of main.ts whose COMMIT constant names the
# checked-out commit. The copy lives in dist/ (ignored by git and by
# fmt/lint/check), so its relative imports are rewritten to point back up.
# Prints the bundle's size: it is a tracked figure (README, Performance).
set -euo pipefail
cd "$(dirname "$0")/.."

# JOB_DISPATCHER_COMMIT stamps builds made without .git (the image build).
if [[ -n "${JOB_DISPATCHER_COMMIT:-}" ]]; then
  commit="$JOB_DISPATCHER_COMMIT"
else
  commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    commit+="-dirty"
  fi
fi
if [[ ! "$commit" =~ ^[A-Za-z0-9._-]+$ ]]; then
  echo "Cannot stamp the commit ${commit@Q}: expected letters, digits, '.', '_' or '-'" >&2
  exit 1
fi
mkdir -p dist
entry="dist/.entry-$$.ts"
trap 'rm -f "$entry"' EXIT
sed -e "s|^const COMMIT = \"dev\";|const COMMIT = \"$commit\";|" \
  -e 's|from "\./|from "../|' main.ts >"$entry"
if ! grep -q "^const COMMIT = \"$commit\";" "$entry"; then
  echo "Cannot stamp the commit: main.ts has no line 'const COMMIT = \"dev\";' to replace" >&2
  exit 1
fi
# client-node contributes types only: credentials are read by kube/kubeconfig.ts,
# kube/credentials.ts and kube/exec.ts, so none of its code is in the bundle.
deno bundle --quiet --minify --platform deno "$entry" -o dist/job-dispatcher.js
bytes="$(wc -c <dist/job-dispatcher.js)"
awk -v b="$bytes" -v c="$commit" \
  'BEGIN { printf "bundled dist/job-dispatcher.js: %d bytes (%.2f MB), commit %s\n", b, b / 1e6, c }'
