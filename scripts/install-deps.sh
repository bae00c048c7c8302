#!/usr/bin/env bash
# Installs the Debian packages virtplane needs, idempotently: nothing
# happens when they are all there. As root it installs what is missing
# with apt-get; otherwise it names the missing packages and fails.
#
#   scripts/install-deps.sh demo   build the binaries and the test guest, run VMs (make demo)
#   scripts/install-deps.sh test   all of demo's, plus what the test tiers use (make test, CI)
#
# Go and terraform are not Debian packages here: it only checks that they
# are on PATH.
set -euo pipefail

# Building: git (version), gcc + pkg-config + libvirt-dev (the cgo
# launcher), xz-utils (make guest unpacks the Debian kernel); make guest's
# disk image needs GRUB's BIOS and EFI images (grub-pc-bin,
# grub-efi-amd64-bin: only the images, not the host boot loader),
# mkfs.fat (dosfstools), mcopy (mtools) and sfdisk (fdisk). Running:
# libvirtd, QEMU, qemu-img (image store, disks), OVMF for EFI guests; the
# node agent's guest firewall needs nft (nftables) and asks virsh
# (libvirt-clients) which user QEMU runs as; the demo reaches its web
# guest's port forward with curl.
demo_pkgs=(git make gcc pkg-config libvirt-dev xz-utils curl
  libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils nftables
  ovmf grub-pc-bin grub-efi-amd64-bin dosfstools mtools fdisk)
# Installed without their recommends: grub-efi-amd64-bin's are the signed
# GRUB and efibootmgr, which would manage this host's own EFI boot; the
# Ceph packages' are ceph-mgr and its Python stack, which the test cluster
# does without (40 packages, 49 MB instead of 89, 58 MB).
norecommends_pkgs=(grub-pc-bin grub-efi-amd64-bin ceph-mon ceph-osd ceph-common qemu-block-extra radosgw)
# The test tiers also cross-check the generated protobuf code and the
# cloud-init ISO writer against the usual tools, and the guest firewall
# tests make network namespaces and veth pairs (iproute2); the control
# plane's tests run servers on an external etcd cluster of Debian's etcd
# (etcd-server, started by the tests on loopback ports of their own); the
# storage tier runs a throwaway Ceph cluster (internal/testutil/ceph: one
# ceph-mon, one ceph-osd, the ceph and rbd CLIs of ceph-common) and boots
# guests from RBD through QEMU's rbd block driver (qemu-block-extra); the
# backup tests put backups in S3 on that cluster's radosgw (one instance,
# started by the tests that ask for it). Installing them starts no daemon
# (radosgw's systemd target has no instance).
test_pkgs=(protobuf-compiler busybox-static cpio
  genisoimage libarchive-tools p7zip-full xorriso iproute2 etcd-server
  ceph-mon ceph-osd ceph-common qemu-block-extra radosgw)

case "${1:-}" in
  demo) pkgs=("${demo_pkgs[@]}") ;;
  test) pkgs=("${demo_pkgs[@]}" "${test_pkgs[@]}") ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "error: missing Debian packages: ${missing[*]}" >&2
    echo "install them as root, then run this again:" >&2
    echo "  sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]}"
  apt-get update -qq
  plain=() norec=()
  for p in "${missing[@]}"; do
    if [[ " ${norecommends_pkgs[*]} " == *" $p "* ]]; then norec+=("$p"); else plain+=("$p"); fi
  done
  if [ ${#norec[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${norec[@]}" >/dev/null
  fi
  if [ ${#plain[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${plain[@]}" >/dev/null
  fi
fi

command -v go >/dev/null || { echo "error: go is not on PATH (https://go.dev/dl/)" >&2; exit 1; }
command -v terraform >/dev/null || { echo "error: terraform is not on PATH: the demo and the acceptance tier need the real terraform CLI (1.11+)" >&2; exit 1; }
