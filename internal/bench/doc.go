// Package bench holds the building blocks of virtplane's benchmarks
// (cmd/virtplane-bench, `make bench`): agent processes started from the
// built binaries, readings from /proc and from the agent's metrics and
// etcd, VM specs, a watch that timestamps VMs reaching Running, summary
// statistics, and the report that is rendered into docs/performance.md.
//
// Nothing here talks to libvirt: that is package bench/virt (cgo, built
// with the libvirt tag), so that this package builds and tests without
// libvirt's headers.
package bench
