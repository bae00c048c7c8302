// Package multinode gives tests several libvirt "hosts" on one machine:
// each node is a private libvirtd and virtlogd with their own state,
// host UUID, hostname and network, so that multi-node tests (images on
// two nodes, live migration, several servers, drain) run against real
// daemons without ever putting two node agents on one libvirtd (their
// domain names would collide, a fenced node's domain would block its
// replacement, and libvirt refuses to migrate to the same host).
//
// How a node is made (docs/testing.md, "Multi-node tests", has what it
// costs):
//
//   - Network: a hub network namespace holds a bridge; each node has a
//     network namespace of its own joined to the bridge by a veth pair,
//     with a link-local address (169.254.S.i/24, i from 1). A second segment is
//     for guests: each node namespace holds the bridge GuestBridge,
//     joined by another veth pair to the hub's guest bridge, which has
//     HubGuestAddr; Node.HubExec runs a command there. The hub's br0
//     has 169.254.S.254 (Node.HubAddr, Hub): services of the run, such
//     as a Ceph cluster (internal/testutil/ceph), live there. Traffic
//     stays inside namespaces the test made; the host's interfaces get
//     no address, unless Options.HostLink asks for a veth pair from the
//     host's namespace into br0 (169.254.S.250 on the host's side), so
//     that processes there reach the hub. A run of no nodes is a hub
//     alone, which other runs' nodes join with Options.Hub.
//   - Files: each node's root dir R holds etc (a copy of /etc/libvirt
//     without the system daemon's domains, networks and pools, and with
//     libvirtd.conf and qemu.conf of its own), run, lib, log and cache
//     (with the host's QEMU capabilities cache copied in: without it every
//     node probes QEMU for ~18 s).
//   - Daemons: a holder process (`nsenter --net=<netns> unshare --mount
//     --uts --propagation private sleep infinity`) owns the node's
//     private mount and UTS namespaces. The harness then enters them with
//     nsenter --target <holder> to bind-mount R's dirs over /etc/libvirt,
//     /run/libvirt, /var/lib/libvirt, /var/log/libvirt and
//     /var/cache/libvirt, to set the hostname, and to exec virtlogd and
//     libvirtd in the foreground as the harness's own children. Every
//     step is a plain exec with an argument list: no shell, and no helper
//     binary to build (a Go process cannot enter a mount namespace once
//     it has threads, so the mounts are done by mount(8) inside the
//     holder's namespace instead).
//
// Connect to a node with Node.URI (qemu+unix:///system?socket=R/run/libvirt-sock);
// its libvirtd also listens on Node.TCPURI (qemu+tcp://addr:16509/system,
// no auth) inside the node network, for peer-to-peer migration between
// nodes: `virsh -c A.URI migrate --live --p2p DOM B.TCPURI`.
//
// Paths outside the five bind mounts are the host's: node agents, disks,
// kernels and console logs under /tmp are seen by every node at the same
// path (what shared-storage migration needs). QEMU runs as libvirt-qemu,
// so directories above its files must be traversable (0755).
//
// Start skips the test, saying why (Unavailable), unless it runs as root
// with libvirtd, virtlogd, virsh, unshare, nsenter, mount, umount, ip,
// hostname, sleep and cp installed and QEMU's user libvirt-qemu. Its
// t.Cleanup destroys and undefines every domain of each node, stops the
// daemons (SIGTERM, then SIGKILL), kills whatever else still runs in the
// node's network namespace (a QEMU libvirtd left behind) and in the
// run's own hub (a Ceph cluster nobody closed), deletes the namespaces
// and the host link, and removes the dirs. Names, addresses, UUIDs and dirs come
// from a random run id, so test packages running at once under
// `go test ./...` never collide. A run whose test process died without
// cleaning up (killed by go test's -timeout) is swept by the next Start:
// each run records its owner process, and runs whose owner is gone are
// removed the same way.
package multinode
