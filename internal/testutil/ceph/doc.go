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
// A radosgw (Cluster.RGW, rgw.go) is started only by the tests that ask
// for S3 (the backup repository's): one per cluster, beast on the
// cluster's address (port 7480 of its namespace), a cephx user of its own
// whose key is in a 0600 keyring file, 16 worker threads instead of 512.
// It is up 1.1-2.5 s after the call (it makes its pools on the first
// start) and holds 46 MiB resident, 125 MiB after 256 MiB went through it
// (TestRGW, BenchmarkRGW; two busy cores, load average about 10). It
// serves HTTPS with a certificate from a CA made for it (RGW.CACertPEM,
// the only CA its clients trust), the way a production S3 endpoint is
// reached; TLS costs little there: 4 MiB objects PUT and GET at 65 MB/s
// over HTTPS and 92 MB/s over HTTP side by side in one run of
// `go test -run - -bench RGW -benchtime 64x ./internal/testutil/ceph/`
// (radosgw CPU 34 against 28 ms an object; an earlier run: PUT 49 against
// 51 MiB/s, GET 119 against 150 MiB/s), far above what a backup's hashing
// and compression leave to send. RGWOptions.HTTP serves plain HTTP.
//
// The package imports no testing package (TB is what it needs of one).
package ceph
