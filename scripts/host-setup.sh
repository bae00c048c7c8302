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

# Start libvirt's daemons when no service manager did. The system daemons
# are found by their pid files or asked, not looked for by name: the
# multi-node tests run private libvirtds and virtlogds (their own
# --pid-file), which a process name match would take for them.
if ! pgrep -F /run/virtlogd.pid -x virtlogd >/dev/null 2>&1; then
  virtlogd -d
fi
if ! virsh -c qemu:///system version >/dev/null 2>&1; then
  libvirtd -d
fi
for _ in $(seq 1 50); do
  virsh -c qemu:///system version >/dev/null 2>&1 && exit 0
  sleep 0.2
done
echo "error: libvirtd does not answer on qemu:///system" >&2
exit 1
