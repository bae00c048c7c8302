#!/usr/bin/env bash
# make demo / make demo-down. Starts an agent with embedded etcd under
# .demo/ (no root needed), applies examples/vm.yaml and shows it.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${VIRTPLANE_DEMO_DIR:-$PWD/.demo}
AGENT=$PWD/bin/virtplane-agent
SOCK=$DEMO/agent.sock
export VIRTPLANE_ENDPOINT=unix://$SOCK

running() { [ -f "$DEMO/agent.pid" ] && kill -0 "$(cat "$DEMO/agent.pid")" 2>/dev/null; }

up() {
  mkdir -p "$DEMO"
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
  echo "\$ virtplane-agent apply -f examples/vm.yaml"
  "$AGENT" apply -f examples/vm.yaml
  echo
  echo "\$ virtplane-agent apply -f examples/invalid-vm.yaml   # refused, with field paths"
  "$AGENT" apply -f examples/invalid-vm.yaml || true
  echo
  echo "\$ virtplane-agent get vm"
  "$AGENT" get vm
  echo
  echo "Agent API: $VIRTPLANE_ENDPOINT   (export VIRTPLANE_ENDPOINT=$VIRTPLANE_ENDPOINT)"
  echo "Stop with: make demo-down"
}

down() {
  if running; then
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
