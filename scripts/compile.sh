#!/usr/bin/env bash
# Compiles dist/job-dispatcher.js (bundled first, see scripts/bundle.sh) into
# one self-contained executable per target: dist/job-dispatcher-<target>.
#
#   scripts/compile.sh [TARGET...]   default: the four release targets
#
# The permissions are those of the `dispatch` task in deno.json, read from
# there, so the binary gets exactly what `deno task dispatch` and the test
# suite run with. `deno compile` downloads the runtime it embeds (denort) for
# each target from dl.deno.land, unless DENORT_BIN names a denort binary, which
# it then uses for the host target: that is the air-gapped way.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin aarch64-apple-darwin)
if (($#)); then TARGETS=("$@"); fi

bash scripts/bundle.sh
read -r -a perms <<<"$(deno eval --quiet '
  const task = JSON.parse(Deno.readTextFileSync("deno.json")).tasks.dispatch;
  console.log(task.split(/\s+/).filter((w) => /^--(allow-|v8-flags=)/.test(w)).join(" "));')"
if ((${#perms[@]} == 0)); then
  echo "Cannot compile: the dispatch task in deno.json has no --allow-* flags to give the binary" >&2
  exit 1
fi
echo "permissions: ${perms[*]}"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for target in "${TARGETS[@]}"; do
  out="dist/job-dispatcher-$target"
  if ! deno compile --quiet --no-check "${perms[@]}" --target "$target" --output "$out" \
    dist/job-dispatcher.js >"$log" 2>&1; then
    cat "$log" >&2
    if grep -qiE 'dns error|error sending request|Connect|timed out|Download' "$log"; then
      # One paragraph: what failed, the air-gapped way, what CI checks instead.
      fold -s -w 80 >&2 <<MSG

Cannot compile $out: deno compile could not download the Deno runtime (denort) that it embeds for $target: dl.deno.land is unreachable from this machine. For an air-gapped build, set DENORT_BIN to a denort binary of this Deno version ($(deno --version | head -n1 | cut -d' ' -f2)) for the host target and run the task again with that target (deno compile then uses it instead of downloading; the deno CLI binary itself is not a denort and yields a REPL). Where compiling is impossible, CI checks the payload instead: the bundle dist/job-dispatcher.js, which the binary embeds unchanged, runs on the end-to-end control plane with the same permissions (e2e/chart_test.ts; the whole suite with JOB_DISPATCHER_ENTRY=dist/job-dispatcher.js deno task e2e).
MSG
    fi
    exit 1
  fi
  echo "compiled $out: $(wc -c <"$out") bytes"
done
