#!/usr/bin/env bash
# make demo / make demo-down.
#
# up: installs what is missing (scripts/install-deps.sh; as root), prepares
# the host (scripts/host-setup.sh), builds the binaries and the test guest,
# starts an agent (role all: API, embedded etcd, controllers, node agent)
# with its state under /var/lib/virtplane-demo/<checkout hash> (where QEMU,
# which runs as libvirt-qemu, can reach it from any checkout: /root is
# 0700; not root: .demo/ in the checkout), imports the guest into the node image
# directory, installs the provider into a local Terraform filesystem mirror
# and applies examples/quickstart, then shows the VMs and their consoles.
# Safe to run again: a running agent is reused and the apply is idempotent.
#
# down: terraform destroy, deletes any VM left, stops the agent and
# removes the state directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# One state directory per checkout, outside it: QEMU runs as libvirt-qemu
# and cannot traverse a checkout's parents when they are private (/root is
# 0700), and a path with a space stays out of sockets and configs.
DEMO_BASE=/var/lib/virtplane-demo
default_demo=$DEMO_BASE/$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
if [ "$(id -u)" != 0 ]; then default_demo=$ROOT/.demo; fi
DEMO=$(realpath -m "${VIRTPLANE_DEMO_DIR:-$default_demo}")
# down removes it: never a directory that holds anything else.
case "$DEMO" in
  / | "$ROOT" | "${HOME:-/}" | "$(dirname "$ROOT")")
    echo "error: VIRTPLANE_DEMO_DIR=$DEMO: use a directory of its own" >&2
    exit 2
    ;;
esac
AGENT=$ROOT/bin/virtplane-agent
PROVIDER=$ROOT/bin/terraform-provider-virtplane
GUEST=$ROOT/bin/guest
SOCK=$DEMO/agent.sock
IMAGES=$DEMO/data/images
TFDIR=$DEMO/terraform
MIRROR=$TFDIR/mirror
# The quickstart is applied from a copy, so its state, lock file and
# .terraform stay under $DEMO and the work tree stays clean.
WORK=$DEMO/quickstart
PROVIDER_ADDR=registry.terraform.io/virtplane/virtplane

export VIRTPLANE_ENDPOINT=unix://$SOCK
# Only the CLI config written here: the provider from the local mirror,
# nothing from the network.
export TF_CLI_CONFIG_FILE=$TFDIR/terraformrc
export TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1
unset TF_DATA_DIR TF_WORKSPACE TF_PLUGIN_CACHE_DIR

running() { [ -f "$DEMO/agent.pid" ] && kill -0 "$(cat "$DEMO/agent.pid")" 2>/dev/null; }

tf() { terraform -chdir="$WORK" "$@"; }

# step prints a command the way a user would type it.
step() { printf '\n$ %s\n' "$*"; }

start_agent() {
  if running; then
    echo "agent already running (pid $(cat "$DEMO/agent.pid")), reusing it"
    return
  fi
  echo "starting virtplane-agent (embedded etcd in $DEMO/data, log $DEMO/agent.log)"
  rm -f "$SOCK"
  # setsid: the agent outlives this script, as a service would.
  setsid "$AGENT" serve --data-dir "$DEMO/data" --socket "$SOCK" \
    --metrics-listen 127.0.0.1:0 >>"$DEMO/agent.log" 2>&1 </dev/null &
  echo $! >"$DEMO/agent.pid"
  for _ in $(seq 1 150); do
    [ -S "$SOCK" ] && "$AGENT" get nodes >/dev/null 2>&1 && return
    running || { echo "agent exited; last log lines:" >&2; tail -20 "$DEMO/agent.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "error: the agent does not answer on $SOCK; see $DEMO/agent.log" >&2
  exit 1
}

# import_guest puts the test guest's kernel and initramfs into the node
# image directory, replacing them only when make guest built new ones.
import_guest() {
  for f in vmlinux initrd.img; do
    if ! cmp -s "$GUEST/$f" "$IMAGES/$f"; then
      "$AGENT" image import "$f" "$GUEST/$f" --image-dir "$IMAGES" --replace
    fi
  done
  # QEMU runs as another user: it must be able to read the boot files.
  chmod -R a+rX "$IMAGES"
}

# provider_version turns the build's version (git describe, as in the
# GNUmakefile) into one Terraform selects without a version constraint:
# a release tag v1.2.3 stays 1.2.3; anything else goes into build
# metadata (1.2.3+4-gabcdef-dirty, 0.0.0+abcdef), because Terraform picks
# a prerelease such as 0.1.0-dev only for an exact constraint.
provider_version() {
  local v core meta
  v=$("$AGENT" version)
  if [[ $v =~ ^v?([0-9]+\.[0-9]+\.[0-9]+)$ ]]; then
    echo "${BASH_REMATCH[1]}"
    return
  fi
  if [[ $v =~ ^v?([0-9]+\.[0-9]+\.[0-9]+)[-+](.+)$ ]]; then
    core=${BASH_REMATCH[1]} meta=${BASH_REMATCH[2]}
  else
    core=0.0.0 meta=$v
  fi
  # Build metadata: dot-separated, non-empty [0-9A-Za-z-] identifiers.
  meta=${meta//[^0-9A-Za-z.-]/-}
  while [[ $meta == *..* ]]; do meta=${meta//../.}; done
  meta=${meta#.}
  meta=${meta%.}
  echo "$core+${meta:-dev}"
}

# install_provider puts the provider just built into a filesystem mirror
# and points a Terraform CLI config at it (no dev_overrides, so no
# warnings, and no network).
install_provider() {
  local version platform dir
  version=$(provider_version)
  platform="$(go env GOOS)_$(go env GOARCH)"
  # One version only: builds of different commits differ only in build
  # metadata, which Terraform cannot order.
  rm -rf "$MIRROR"
  dir=$MIRROR/$PROVIDER_ADDR/$version/$platform
  mkdir -p "$dir"
  cp "$PROVIDER" "$dir/terraform-provider-virtplane_v$version"
  cat >"$TF_CLI_CONFIG_FILE" <<EOF
# Written by scripts/demo.sh: the virtplane provider from the local mirror.
disable_checkpoint = true
provider_installation {
  filesystem_mirror {
    path    = "$MIRROR"
    include = ["$PROVIDER_ADDR"]
  }
  direct {
    exclude = ["$PROVIDER_ADDR"]
  }
}
EOF
  echo "provider $version installed into $MIRROR"

  mkdir -p "$WORK"
  rm -f "$WORK"/*.tf
  cp "$ROOT"/examples/quickstart/*.tf "$WORK/"
  # A rebuilt provider keeps its version but not its checksum: lock anew
  # (from the mirror, so init does not warn about local checksums).
  rm -f "$WORK/.terraform.lock.hcl"
  if ! tf providers lock -fs-mirror="$MIRROR" -platform="$platform" "$PROVIDER_ADDR" >"$TFDIR/init.log" 2>&1 ||
    ! tf init -input=false >>"$TFDIR/init.log" 2>&1; then
    cat "$TFDIR/init.log" >&2
    echo "error: terraform init failed (log $TFDIR/init.log)" >&2
    exit 1
  fi
}

# uid_of prints the uid of object $1 (vm or vmi) named $2, or nothing.
uid_of() {
  "$AGENT" get "$1" "$2" -o json 2>/dev/null | sed -n 's/.*"uid": *"\([^"]*\)".*/\1/p' | sed -n 1p || true
}

# console prints the console log of VM $1 so far: the console command
# where this agent has it, else the node agent's console log file.
HAVE_CONSOLE=
console() {
  if [ "$HAVE_CONSOLE" = yes ]; then
    "$AGENT" console "$1" --log --no-follow 2>/dev/null || true
    return
  fi
  local vm_uid vmi_uid f
  vm_uid=$(uid_of vm "$1")
  vmi_uid=$(uid_of vmi "$1")
  f=$DEMO/data/node/vmis/$vmi_uid/console.log
  if [ -z "$vmi_uid" ] || [ ! -f "$f" ]; then
    # An ended instance's log may be kept with its VM: the newest one.
    f=$(find "$DEMO/data/node/vms/${vm_uid:-none}" -type f -name 'console*' -printf '%T@ %p\n' 2>/dev/null |
      sort -rn | sed -n '1s/^[^ ]* //p') || true
  fi
  if [ -n "$f" ] && [ -f "$f" ]; then cat "$f"; fi
}

# snapshot keeps the console output of VM $1 in $DEMO/consoles/$1, so
# that it can still be shown when the instance has ended and its log
# went with it.
snapshot() {
  local out
  out=$(console "$1" | tr -d '\r')
  if [ -n "$out" ]; then printf '%s\n' "$out" >"$DEMO/consoles/$1"; fi
}

# phase_is reports whether VM $1's instance is in phase $2.
phase_is() {
  "$AGENT" get vmi "$1" 2>/dev/null | awk -v p="$2" 'NR > 1 && $3 == p { found = 1 } END { exit !found }'
}

# watch_guests waits (at most 90 s) until hello has done its disk steps
# (the persistent disk is its last) and once has powered itself off,
# keeping their console output on the way.
watch_guests() {
  mkdir -p "$DEMO/consoles"
  for _ in $(seq 1 90); do
    snapshot hello
    snapshot once
    snapshot web
    if grep -aqE 'VIRTPLANE-PERSIST-WROTE|VIRTPLANE-GUEST-WARNING' "$DEMO/consoles/hello" 2>/dev/null &&
      phase_is once Succeeded; then
      return
    fi
    sleep 1
  done
  echo "note: the guests did not get as far as expected within 90 s"
}

show_console() {
  local out
  snapshot "$1"
  out=$(sed -e '/^[[:space:]]*$/d' -e 's/^/  /' "$DEMO/consoles/$1" 2>/dev/null | sed -n 1,20p) || true
  echo
  echo "first console lines of $1:"
  echo "${out:-  (no console output)}"
}

up() {
  ./scripts/install-deps.sh demo
  if [ "$(id -u)" = 0 ]; then
    ./scripts/host-setup.sh
  else
    echo "note: not root: skipping host setup (/dev/kvm group, libvirtd); guests need libvirtd on qemu:///system"
  fi
  make --no-print-directory build guest
  HAVE_CONSOLE=no
  if "$AGENT" console --help >/dev/null 2>&1; then HAVE_CONSOLE=yes; fi
  # QEMU runs as another user and must traverse to the node's files.
  echo "demo state in $DEMO"
  if [ "$DEMO" != "$ROOT/.demo" ] && [ -z "${VIRTPLANE_DEMO_DIR:-}" ]; then install -d -m 0755 "$DEMO_BASE"; fi
  install -d -m 0755 "$DEMO" "$DEMO/data" "$IMAGES"
  mkdir -p "$TFDIR"
  start_agent
  import_guest
  install_provider

  step "terraform -chdir=${WORK#"$ROOT"/} apply -auto-approve   # a copy of examples/quickstart"
  if ! tf apply -input=false -auto-approve; then
    echo "error: terraform apply failed; agent log: $DEMO/agent.log (make demo-down cleans up)" >&2
    exit 1
  fi

  step "virtplane-agent apply -f examples/invalid-vm.yaml   # refused, with field paths"
  "$AGENT" apply -f examples/invalid-vm.yaml || true

  watch_guests
  step "virtplane-agent get vm"
  "$AGENT" get vm
  step "virtplane-agent get vmi"
  "$AGENT" get vmi
  show_console hello
  show_console once
  show_console web

  # The port forward: the guest's own HTTP server answers on the host's
  # loopback. Its server may start a moment after the guest agent that
  # apply waited for; curl retries refused connections for up to 60 s.
  step "curl http://127.0.0.1:18080/   # web's port 80, forwarded"
  if ! curl -sS --max-time 5 --retry 60 --retry-delay 1 --retry-connrefused --retry-all-errors http://127.0.0.1:18080/; then
    echo "error: web did not answer on 127.0.0.1:18080; agent log: $DEMO/agent.log" >&2
    exit 1
  fi

  local see_console="virtplane-agent console hello -i         # its serial console; Ctrl-] leaves"
  if [ "$HAVE_CONSOLE" != yes ]; then see_console="ls $DEMO/data/node/vmis/*/console.log   # the serial consoles"; fi
  cat <<EOF

Try it (the agent keeps running; its log is $DEMO/agent.log):
  export PATH="$ROOT/bin:\$PATH" VIRTPLANE_ENDPOINT=$VIRTPLANE_ENDPOINT
  virtplane-agent get vm -w
  $see_console
  export TF_CLI_CONFIG_FILE=$TF_CLI_CONFIG_FILE
  terraform -chdir=$WORK plan   # edit main.tf there, then apply
Stop with: make demo-down
EOF
}

down() {
  if running; then
    if [ -f "$WORK/terraform.tfstate" ] && [ -f "$TF_CLI_CONFIG_FILE" ]; then
      step "terraform -chdir=${WORK#"$ROOT"/} destroy -auto-approve"
      tf destroy -input=false -auto-approve || echo "warning: terraform destroy failed; deleting the VMs directly" >&2
    fi
    # Any VM left (made by hand, or a failed destroy): deleting it lets
    # the node agent shut the guest down and remove its domain, launcher
    # and files.
    "$AGENT" get vm -A 2>/dev/null | awk 'NR > 1 { print $1, $2 }' | while read -r ns vm; do
      "$AGENT" -n "$ns" delete vm "$vm" --wait --timeout 90s >/dev/null 2>&1 || true
    done || true
    pid=$(cat "$DEMO/agent.pid")
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    echo "agent stopped"
  fi
  rm -rf "$DEMO"
  # The base directory goes with the last checkout's state.
  if [ -z "${VIRTPLANE_DEMO_DIR:-}" ] && [ -d "$DEMO_BASE" ]; then rmdir "$DEMO_BASE" 2>/dev/null || true; fi
  echo "demo state removed ($DEMO)"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
