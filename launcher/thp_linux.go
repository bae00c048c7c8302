//go:build libvirt

package main

/*
#include <sys/prctl.h>

// virtplane_launcher_no_thp turns transparent huge pages off for this
// process before the Go runtime, libvirt or glib allocate anything (a C
// constructor runs before the Go runtime starts). On a host with THP
// "always", every heap, arena and thread stack of a launcher was faulted
// in 2 MiB at a time: zeroing those pages was the largest single cost of
// starting a launcher in a density profile (clear_page_erms), and it made
// an idle launcher's private memory grow in 2 MiB steps. A launcher is a
// small control process with no use for huge pages; QEMU, which has, is
// libvirtd's child and keeps the host's setting.
__attribute__((constructor)) static void virtplane_launcher_no_thp(void) {
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
}
*/
import "C"
