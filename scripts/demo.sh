#!/usr/bin/env bash
# make demo / make demo-down. Starts an agent (role all: API, embedded
# etcd, controllers, node agent) with its state under .demo/, boots the
# test guest as a VM and shows it with its first console lines.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${VIRTPLANE_DEMO_DIR:-$PWD/.demo}
AGENT=$PWD/bin/virtplane-agent
SOCK=$DEMO/agent.sock
export VIRTPLANE_ENDPOINT=unix://$SOCK

running() { [ -f "$DEMO/agent.pid" ] && kill -0 "$(cat "$DEMO/agent.pid")" 2>/dev/null; }

up() {
  mkdir -p "$DEMO/data/images"
  if [ "$(id -u)" = 0 ]; then
    ./scripts/host-setup.sh
  else
    echo "note: not root: skipping host setup (/dev/kvm group, libvirtd); guests need libvirtd on qemu:///system"
  fi
  # The guest make guest built, as base images of the demo node.
  for f in vmlinux initrd.img; do
    cp -f "$PWD/bin/guest/$f" "$DEMO/data/images/$f"
  done
  chmod -R a+rX "$DEMO/data/images"
  if running; then
    echo "agent already running (pid $(cat "$DEMO/agent.pid"))"
  else
    echo "starting virtplane-agent (embedded etcd in $DEMO/data, log $DEMO/agent.log)"
    # setsid: the agent outlives this script, as a service would.
    setsid "$AGENT" serve --data-dir "$DEMO/data" --socket "$SOCK" \
      --metrics-listen 127.0.0.1:0 >>"$DEMO/agent.log" 2>&1 < /dev/null &
    echo $! > "$DEMO/agent.pid"
    for _ in $(seq 1 100); do
      [ -S "$SOCK" ] && "$AGENT" get nodes >/dev/null 2>&1 && break
      running || { echo "agent exited; last log lines:"; tail -20 "$DEMO/agent.log"; exit 1; }
      sleep 0.2
    done
  fi
  echo
  echo "\$ virtplane-agent apply -f examples/demo-vm.yaml"
  "$AGENT" apply -f examples/demo-vm.yaml
  echo "waiting for the guest to boot (TCG: about 5-10 s)..."
  for _ in $(seq 1 120); do
    "$AGENT" get vm demo 2>/dev/null | grep -q ' Running ' && break
    sleep 1
  done
  echo
  echo "\$ virtplane-agent apply -f examples/invalid-vm.yaml   # refused, with field paths"
  "$AGENT" apply -f examples/invalid-vm.yaml || true
  echo
  echo "\$ virtplane-agent get vm"
  "$AGENT" get vm
  echo
  echo "\$ virtplane-agent get vmi"
  "$AGENT" get vmi
  uid=$("$AGENT" get vmi demo -o json 2>/dev/null | sed -n 's/.*"uid": *"\([^"]*\)".*/\1/p' | head -1)
  log="$DEMO/data/node/vmis/$uid/console.log"
  for _ in $(seq 1 30); do
    [ -n "$uid" ] && [ -f "$log" ] && grep -q VIRTPLANE-GUEST-BOOTED "$log" && break
    sleep 1
  done
  echo
  echo "first console lines of demo ($log):"
  [ -f "$log" ] && grep -a -m 5 -E 'VIRTPLANE|Linux version' "$log" | sed 's/^/  /' || echo "  (no console log yet)"
  echo
  echo "Agent API: $VIRTPLANE_ENDPOINT   (export VIRTPLANE_ENDPOINT=$VIRTPLANE_ENDPOINT)"
  echo "Stop with: make demo-down"
}

down() {
  if running; then
    # Delete the VMs first, so the node agent shuts the guests down and
    # removes their domains, launchers and files.
    "$AGENT" get vm -A 2>/dev/null | awk 'NR > 1 { print $1, $2 }' | while read -r ns vm; do
      "$AGENT" -n "$ns" delete vm "$vm" --wait --timeout 90s >/dev/null 2>&1 || true
    done
    pid=$(cat "$DEMO/agent.pid")
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "agent stopped"
  fi
  rm -rf "$DEMO"
  echo "demo state removed"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
