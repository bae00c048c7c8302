// Package hostns finds the network namespace of the libvirt daemon behind
// a local libvirt URI: the namespace its QEMU processes inherit, so the
// one whose bridges a guest's tap can join. On a host that is the agent's
// own; in the multi-node test harness every node's libvirtd has a network
// namespace of its own while its node agent runs in the host's.
//
// The daemon is found through its socket, not a pid file: the kernel
// says who listens there (SO_PEERCRED), whatever the daemon's name
// (libvirtd, virtqemud) and wherever its pid file is.
package hostns

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotLocal is returned for a URI that does not name a daemon on this
// host through a unix socket (qemu+tcp://, qemu+ssh://, ...).
var ErrNotLocal = errors.New("not a local libvirt URI")

// Sockets where a system libvirt daemon listens by default, the modular
// QEMU daemon first (Debian 12 runs the monolithic libvirtd).
var defaultSockets = []string{"/run/libvirt/virtqemud-sock", "/run/libvirt/libvirt-sock"}

// Socket is the unix socket the daemon of uri listens on: the socket
// parameter, else the system daemon's default one that exists.
func Socket(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("libvirt URI %q: %w", uri, err)
	}
	driver, transport, _ := strings.Cut(u.Scheme, "+")
	if driver == "" || u.Host != "" || (transport != "" && transport != "unix") {
		return "", fmt.Errorf("libvirt URI %q: %w", uri, ErrNotLocal)
	}
	if s := u.Query().Get("socket"); s != "" {
		return s, nil
	}
	for _, s := range defaultSockets {
		if _, err := os.Stat(s); err == nil {
			return s, nil
		}
	}
	return "", fmt.Errorf("libvirt URI %q: no daemon socket at %s", uri, strings.Join(defaultSockets, " or "))
}

// DaemonNetNS is the path of the network namespace (/proc/PID/ns/net) of
// the process listening on the daemon socket of uri.
func DaemonNetNS(uri string) (string, error) {
	sock, err := Socket(uri)
	if err != nil {
		return "", err
	}
	pid, err := peerPid(sock)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid), nil
}

// peerPid connects to the unix socket at path and asks the kernel for
// the pid of the process that accepted (SO_PEERCRED), then hangs up.
func peerPid(path string) (int, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return 0, fmt.Errorf("connecting to %s: %w", path, err)
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("SO_PEERCRED on %s: %w", path, cerr)
	}
	if cred.Pid <= 0 {
		return 0, fmt.Errorf("SO_PEERCRED on %s: no pid (the daemon is in another pid namespace)", path)
	}
	return int(cred.Pid), nil
}
