#!/usr/bin/env bash
# Builds the release tools into e2e/.bin/ from their Go modules:
#   helm        helm.sh/helm/v3/cmd/helm, pinned in tools/helm/go.mod (chart tests)
#   actionlint  github.com/rhysd/actionlint/cmd/actionlint, pinned in
#               tools/actionlint/go.mod (checks .github/workflows in .ci/run)
#   prometheus  github.com/prometheus/prometheus/cmd/prometheus, pinned in
#               tools/prometheus/go.mod (the health gate suites' Prometheus)
# Usage: tools/build.sh [NAME...]: the named tools only, or all of them.
# Each tool is its own module, so helm's Kubernetes libraries never meet the
# ones e2e/cluster pins. As in e2e/build.sh, a build is skipped when its stamp
# (a hash of the Go version, the module's go.mod and go.sum, and this script)
# matches the one recorded beside the binary; the Go module and build caches
# are the usual ones, so a rebuild after a version bump only compiles what
# changed.
set -euo pipefail

start=$(date +%s%N)
elapsed() { awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1fs", ns / 1e9 }'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$(cd "$here/.." && pwd)/e2e/.bin"

if ! command -v go >/dev/null 2>&1; then
  echo "Cannot build the tools: 'go' is not on PATH; install Go >= 1.26 (https://go.dev/dl/) and retry" >&2
  exit 1
fi
go_version="$(go env GOVERSION)"
if [[ ! "$go_version" =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 26)); then
  echo "Cannot build the tools: found $go_version; install Go >= 1.26 (https://go.dev/dl/) and retry" >&2
  exit 1
fi

stamp() { # MODULE_DIR
  {
    echo "$go_version"
    sha256sum "$1/go.mod" "$1/go.sum" "$here/build.sh" | sed "s| $here/| |"
  } | sha256sum | cut -d' ' -f1
}
current() { # NAME STAMP
  [[ -x "$bin/$1" && -f "$bin/.stamp-$1" && "$(cat "$bin/.stamp-$1")" == "$2" ]]
}
# The version of a module as go.mod pins it, for the binaries' version strings.
pinned() { # MODULE_DIR MODULE_PATH
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

mkdir -p "$bin"
built=()
wanted() { # NAME
  ((${#requested[@]} == 0)) || [[ " ${requested[*]} " == *" $1 "* ]]
}
requested=("$@")
build() { # NAME MODULE_DIR PACKAGE LDFLAGS [TAGS]
  local s
  wanted "$1" || return 0
  s="$(stamp "$2")"
  current "$1" "$s" && return
  rm -f "$bin/.stamp-$1"
  # Build beside the target and rename, so an interrupted build never leaves
  # a truncated binary behind.
  (cd "$2" && go build -trimpath -tags "${5:-}" -ldflags "$4" -o "$bin/$1.tmp" "$3")
  mv -f "$bin/$1.tmp" "$bin/$1"
  echo "$s" >"$bin/.stamp-$1"
  built+=("$1")
}

# As helm's own Makefile: stamp the version, and the Kubernetes version that
# `helm template` and `helm lint` assume, derived from the client-go it links
# (v0.N.x is Kubernetes 1.N); unstamped, helm assumes 1.20 and refuses charts
# that need newer.
if wanted helm; then
helm_version="$(pinned "$here/helm" helm.sh/helm/v3)"
client_go="$(pinned "$here/helm" k8s.io/client-go)"
k8s_minor="$(echo "$client_go" | cut -d. -f2)"
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
build helm "$here/helm" helm.sh/helm/v3/cmd/helm "$helm_ldflags"
fi
if wanted actionlint; then
actionlint_version="$(pinned "$here/actionlint" github.com/rhysd/actionlint)"
build actionlint "$here/actionlint" github.com/rhysd/actionlint/cmd/actionlint \
  "-s -w -X github.com/rhysd/actionlint.version=$actionlint_version"
fi
# Prometheus without its service discoveries (remove_all_sd: the suites use
# static_configs only, and the cloud SDKs are most of its build) and without
# its web UI's assets (only builtinassets embeds them, and the suites use the
# HTTP API alone), its version stamped as its Makefile (promu) does.
if wanted prometheus; then
# The module's v0.316.0 is Prometheus 3.16.0: its VERSION file says which.
# `go list -m` reads no module it has not downloaded (its Dir is then empty,
# as on a fresh machine's module cache): download it first.
prometheus_dir="$(cd "$here/prometheus" && go mod download github.com/prometheus/prometheus &&
  go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)"
if [[ ! -f "$prometheus_dir/VERSION" ]]; then
  echo "Cannot build prometheus: no VERSION in its module ('$prometheus_dir'); check the Go module proxy (go env GOPROXY)" >&2
  exit 1
fi
prometheus_version="$(cat "$prometheus_dir/VERSION")"
build prometheus "$here/prometheus" github.com/prometheus/prometheus/cmd/prometheus \
  "-s -w -X github.com/prometheus/common/version.Version=$prometheus_version" remove_all_sd
fi

if ((${#built[@]})); then
  echo "built ${built[*]} in $bin in $(elapsed)"
else
  echo "tools are up to date in $bin (checked in $(elapsed))"
fi
