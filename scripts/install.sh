#!/usr/bin/env bash
# Installs the `job-dispatcher` command, and the kubectl plugin
# `kubectl job-dispatcher`, with `deno install -g` of the bundle: the way to
# get the command where no compiled binary is at hand (no release download,
# no denort for `deno compile`). Deno runs the bundle, so the machine needs
# Deno 2 on PATH; the binary needs nothing.
#
#   scripts/install.sh [ROOT]   default: $DENO_INSTALL_ROOT, else ~/.deno
#
# The bundle is copied to ROOT/share/job-dispatcher/ because the installed
# shim runs it from where it was installed from: a `git clean` of dist/
# would break the command. The permissions are those `deno compile` gives
# the binary (scripts/compile.sh), read from the `dispatch` task in deno.json.
set -euo pipefail
cd "$(dirname "$0")/.."

root="${1:-${DENO_INSTALL_ROOT:-$HOME/.deno}}"
bash scripts/bundle.sh
read -r -a perms <<<"$(deno eval --quiet '
  const task = JSON.parse(Deno.readTextFileSync("deno.json")).tasks.dispatch;
  console.log(task.split(/\s+/).filter((w) => /^--(allow-|v8-flags=)/.test(w)).join(" "));')"
if ((${#perms[@]} == 0)); then
  echo "Cannot install: the dispatch task in deno.json has no --allow-* flags to give the command" >&2
  exit 1
fi
share="$root/share/job-dispatcher"
mkdir -p "$share"
cp dist/job-dispatcher.js "$share/job-dispatcher.js"
# kubectl runs kubectl-<name> on PATH as `kubectl <name>`, reading "_" as "-"
# (scripts/krew.ts, PLUGIN_BIN).
for name in job-dispatcher kubectl-job_dispatcher; do
  deno install --global --force --quiet --no-config "${perms[@]}" --root "$root" \
    --name "$name" "$share/job-dispatcher.js"
done
echo "installed $root/bin/job-dispatcher and $root/bin/kubectl-job_dispatcher (kubectl job-dispatcher)"
case ":$PATH:" in
*":$root/bin:"*) ;;
*) echo "add it to PATH: export PATH=\"$root/bin:\$PATH\"" ;;
esac
