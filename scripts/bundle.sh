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
cn="dist/.client-node-$$.cjs"
lazy="dist/.client-node-$$.js"
map="dist/.import-map-$$.json"
trap 'rm -f "$entry" "$cn" "$lazy" "$map"' EXIT
sed -e "s|^const COMMIT = \"dev\";|const COMMIT = \"$commit\";|" \
  -e 's|from "\./|from "../|' main.ts >"$entry"
if ! grep -q "^const COMMIT = \"$commit\";" "$entry"; then
  echo "Cannot stamp the commit: main.ts has no line 'const COMMIT = \"dev\";' to replace" >&2
  exit 1
fi
# client-node's KubeConfig serves only kubeconfigs with exec plugins, auth
# providers and the like (kube.ts imports it on demand; kubeconfig.ts reads the
# rest). Inside the main bundle even a dynamic import costs every start about
# 90 ms of CPU: V8 loads its 1.3 MB of dormant code, and esbuild hoists its
# node: imports to the top. So it is bundled apart, as CommonJS, and embedded
# as a string that is compiled only on that import: the main bundle's import
# map points @kubernetes/client-node/dist/config.js at the embedding module.
# Nothing is loaded at run time but the one file.
deno bundle --quiet --minify --platform deno --format cjs scripts/_client_node.ts -o "$cn"
deno run --quiet --allow-read --allow-write scripts/_embed.ts "$cn" "$lazy" "$map"
deno bundle --quiet --minify --platform deno --import-map "$map" "$entry" -o dist/job-dispatcher.js
bytes="$(wc -c <dist/job-dispatcher.js)"
awk -v b="$bytes" -v c="$commit" \
  'BEGIN { printf "bundled dist/job-dispatcher.js: %d bytes (%.2f MB), commit %s\n", b, b / 1e6, c }'
