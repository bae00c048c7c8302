// Package ceph runs a throwaway Ceph cluster for tests: one ceph-mon and
// one BlueStore ceph-osd on a sparse file, from Debian's packages, no
// ceph-mgr, in a network namespace and bound to an address there, as
// measured in ../shared/reference/ceph-rbd.md (about 6 s to a pool that
// takes I/O, about 100 MiB of RSS).
//
// Why a namespace: on a virtplane host the guest firewall (package
// guestnet) rejects connections from QEMU's user to every local address,
// so a cluster on the host's own addresses is out of reach of the system
// libvirtd's QEMUs (virsh create hangs for librados' 300 s mount
// timeout). An address routed into another namespace is not local.
//
// How it starts (Start): a ceph.conf of its own under Options.Dir (the
// reference's, with the tuned paxos settings that halve the start, "cluster
// addr" so that the OSD binds nothing on 0.0.0.0, and a [client] mount
// timeout so that a CLI never waits 300 s); the mon. and client.admin
// keyrings from ceph-authtool; a monmap; ceph-mon --mkfs; the mon; the
// pool, before any OSD (it only needs the mon); the OSD's id and key
// (ceph osd new, its secret on stdin); ceph-osd --mkfs; the OSD; `ceph osd
// stat` polled until it is up; `rbd pool init`, which returns once the
// pool's placement groups are active. The daemons run in the foreground
// (-f) as children of the test process through internal/testutil/proc,
// tied to it (a test killed by -timeout leaves no daemon), and every
// command runs in the namespace through nsenter, with an argument list.
// Secrets never reach a command line: keys are generated into files (0600)
// or passed on stdin.
//
// In the multi-node harness a cluster lives in a run's hub namespace
// (StartInHub, with multinode.Options.HostLink when processes in the
// host's namespace must reach it), or once per test package in a hub of
// its own that the package's runs join (Shared). Tests gate on Require:
// it skips unless root with Ceph's daemons and tools and QEMU's rbd block
// module installed, and fails instead when EnvRequired is set, as make
// test sets it, so that CI never skips the storage tier silently.
//
// The package imports no testing package (TB is what it needs of one).
package ceph
