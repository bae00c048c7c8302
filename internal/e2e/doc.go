// Package e2e holds virtplane's end-to-end tests: the real agent (API
// server in the test process, node agent as its own process), the real
// virtplane-launcher, libvirtd and QEMU, booting the test guest of
// internal/testguest under TCG.
//
// They run when VIRTPLANE_TEST_LIBVIRT_URI and VIRTPLANE_TEST_GUEST_DIR are
// set (`make test` sets both after `make guest`) and skip otherwise. Set
// VIRTPLANE_E2E_REPORT to a file to have the measured resource figures
// appended to it.
package e2e
