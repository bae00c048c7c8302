#!/usr/bin/env bash
# Checks that `make demo` works from any checkout path, as a new user's
# clone would be (issue 14): under root's home (mode 0700, which QEMU's
# user cannot traverse), under /tmp, and in a path with a space. Each
# clone runs `make demo` twice (the second applies no change) and
# `make demo-down`, which must leave no state directory, agent or domain.
# Run by `make test` (demo-check) after the other tiers; needs root.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEMO_BASE=/var/lib/virtplane-demo

if [ "$(id -u)" != 0 ]; then
  echo "demo-check: skipped (needs root: the demo uses the system libvirtd)"
  exit 0
fi

dirs=()
cleanup() {
  for d in "${dirs[@]}"; do
    [ -d "$d" ] && (cd "$d" && make demo-down) >/dev/null 2>&1 || true
    rm -rf "$d"
  done
}
trap cleanup EXIT

check() {
  local dir=$1 log
  dirs+=("$dir")
  git clone --quiet "$ROOT" "$dir"
  log=$(mktemp)
  echo "demo-check: make demo in '$dir'"
  if ! (cd "$dir" && make demo) >"$log" 2>&1; then
    tail -40 "$log"; echo "demo-check: make demo failed in '$dir'" >&2; return 1
  fi
  for host in hello once web; do
    if ! grep -q "VIRTPLANE-GUEST-BOOTED hostname=$host " "$log"; then
      tail -40 "$log"; echo "demo-check: $host did not boot in '$dir'" >&2; return 1
    fi
  done
  # curl of the port forward printed the guest's hostname on a line of
  # its own, right after the step that ran it.
  if ! grep -A1 -F 'curl http://127.0.0.1:18080/' "$log" | grep -qx web; then
    tail -40 "$log"; echo "demo-check: web's port forward did not answer in '$dir'" >&2; return 1
  fi
  if ! (cd "$dir" && make demo) >"$log" 2>&1 || ! grep -q "No changes" "$log"; then
    tail -40 "$log"; echo "demo-check: a second make demo in '$dir' failed or changed something" >&2; return 1
  fi
  (cd "$dir" && make demo-down) >"$log" 2>&1 || { tail -40 "$log"; echo "demo-check: demo-down failed in '$dir'" >&2; return 1; }
  local state
  state=$DEMO_BASE/$(printf '%s' "$(cd "$dir" && pwd)" | sha256sum | cut -c1-12)
  if [ -e "$state" ]; then echo "demo-check: demo-down left $state" >&2; return 1; fi
  if pgrep -f "$state/" >/dev/null; then echo "demo-check: demo-down left a process of $state" >&2; return 1; fi
  if [ -n "$(git -C "$dir" status --porcelain)" ]; then
    git -C "$dir" status --short; echo "demo-check: the demo left files in '$dir'" >&2; return 1
  fi
  rm -f "$log"
}

home=$(mktemp -d /root/vp-demo-check.XXXXXX)   # /root is 0700
tmp=$(mktemp -d /tmp/vp-demo-check.XXXXXX)
dirs+=("$home" "$tmp")
check "$home/virtplane"
check "$tmp/virtplane"
check "$tmp/with space/virtplane"
if virsh -c qemu:///system list --all --name | grep -q '^default_\(hello\|once\)$'; then
  echo "demo-check: a demo domain is left" >&2; exit 1
fi
echo "demo-check: ok (/root, /tmp and a path with a space)"
