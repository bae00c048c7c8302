#!/usr/bin/env bash
# Host settings the node agent needs, as a normal host has them, then
# libvirt's daemons. Idempotent; run as root.
set -euo pipefail

# udev gives /dev/kvm to group kvm with mode 0660. Without that, libvirt
# re-probes QEMU's capabilities on every domain start (about 45 s each).
if [ -e /dev/kvm ]; then
  getent group kvm >/dev/null || groupadd --system kvm
  chgrp kvm /dev/kvm
  chmod 0660 /dev/kvm
fi

# Start libvirt's daemons when no service manager did.
if ! pgrep -x virtlogd >/dev/null; then
  virtlogd -d
fi
# The system daemon is asked, not looked for by name: the multi-node
# tests run private libvirtds (their own --pid-file), which a process
# name match would take for it.
if ! virsh -c qemu:///system version >/dev/null 2>&1; then
  libvirtd -d
fi
for _ in $(seq 1 50); do
  virsh -c qemu:///system version >/dev/null 2>&1 && exit 0
  sleep 0.2
done
echo "error: libvirtd does not answer on qemu:///system" >&2
exit 1
