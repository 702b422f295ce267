#!/usr/bin/env bash
# Builds the e2e control-plane binaries into e2e/.bin/:
#   k8s   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
#         certs and outcomes in one multi-call binary (e2e/cluster)
#   kwok  kwok's controller at the version pinned in e2e/cluster/go.mod
# A binary's build is skipped when its stamp (a hash of its Go sources, go.mod,
# go.sum and this script) matches the one recorded beside it. The Go module
# and build caches are the usual ones (go env GOMODCACHE GOCACHE), so a rebuild
# after editing one .go file only recompiles that package and relinks.
set -euo pipefail

start=$(date +%s%N)
elapsed() { awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1fs", ns / 1e9 }'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/cluster"
bin="$here/.bin"

if ! command -v go >/dev/null 2>&1; then
  echo "Cannot build the e2e cluster: 'go' is not on PATH; install Go >= 1.26 (https://go.dev/dl/) and retry" >&2
  exit 1
fi
go_version="$(go env GOVERSION)"
if [[ ! "$go_version" =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 26)); then
  echo "Cannot build the e2e cluster: found $go_version; install Go >= 1.26 (https://go.dev/dl/) and retry" >&2
  exit 1
fi

# One stamp per binary: kwok only depends on kwok/ and the module files, and
# relinking an unchanged binary still costs seconds.
stamp() { # FIND_ARGS... (selecting the binary's own .go files)
  (
    cd "$src"
    {
      echo "$go_version"
      sha256sum go.mod go.sum
      # The script's content, not its path: worktrees sharing one .bin
      # would otherwise rebuild each other's binaries.
      sha256sum <"$here/build.sh"
      find "$@" -name '*.go' -print | LC_ALL=C sort | xargs sha256sum
    } | sha256sum | cut -d' ' -f1
  )
}
k8s_stamp="$(stamp . -path ./kwok -prune -o)"
kwok_stamp="$(stamp ./kwok)"
current() { # NAME STAMP
  [[ -x "$bin/$1" && -f "$bin/.stamp-$1" && "$(cat "$bin/.stamp-$1")" == "$2" ]]
}
if current k8s "$k8s_stamp" && current kwok "$kwok_stamp"; then
  echo "e2e binaries are up to date in $bin (checked in $(elapsed))"
  exit 0
fi

# The version ldflags make /version report the release the sources are pinned
# at, instead of v0.0.0-master, which clients such as kubectl warn about.
k8s_version=v1.36.3
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
done
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z"

mkdir -p "$bin"
cd "$src"
build() { # NAME STAMP PACKAGE LDFLAGS
  current "$1" "$2" && return
  rm -f "$bin/.stamp-$1"
  # Build beside the target and rename, so an interrupted build never leaves
  # a truncated binary behind.
  go build -trimpath -ldflags "$4" -o "$bin/$1.tmp" "$3"
  mv -f "$bin/$1.tmp" "$bin/$1"
  echo "$2" >"$bin/.stamp-$1"
}
build k8s "$k8s_stamp" . "$ldflags"
build kwok "$kwok_stamp" ./kwok "-s -w"
echo "built e2e binaries in $bin in $(elapsed)"
