#!/usr/bin/env bash
# Rebuild tpukit/graph/assets/dagre.min.js, the layout library the HLO graph view bundles,
# from the npm registry, and check it against the recorded sha256.
#
#   scripts/build_layout_bundle.sh            # fetch, verify, copy
#   scripts/build_layout_bundle.sh --check    # only verify the copy in the package
#
# To move to a new release, change VERSION and SHA256 below (and in assets/README.md),
# run this script, and run tests/graph/test_browser.py.
set -euo pipefail

PACKAGE="@dagrejs/dagre"
VERSION="3.1.3"
SHA256="54a503e346f93ca0bb10abe7999587e037262935687aca45eb4e4b0f64bbb578"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="$ROOT/tpukit/graph/assets"

verify() {
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [[ "$got" != "$SHA256" ]]; then
    echo "sha256 mismatch for $1: expected $SHA256, got $got" >&2
    exit 1
  fi
}

if [[ "${1:-}" == "--check" ]]; then
  verify "$ASSETS/dagre.min.js"
  echo "ok: $ASSETS/dagre.min.js is $PACKAGE@$VERSION"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
tar -xzf "$WORK"/*.tgz -C "$WORK"
verify "$WORK/package/dist/dagre.min.js"
cp "$WORK/package/dist/dagre.min.js" "$ASSETS/dagre.min.js"
cp "$WORK/package/LICENSE" "$ASSETS/dagre.LICENSE.txt"
echo "copied $PACKAGE@$VERSION ($(wc -c <"$ASSETS/dagre.min.js") bytes) into $ASSETS"
