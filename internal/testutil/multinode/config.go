package multinode

import (
	"fmt"
	"strings"
)

// confValue is one setting of a libvirt configuration file (libvirtd.conf,
// qemu.conf: libvirt's own "key = value" format, virConf).
type confValue struct {
	key string
	// Exactly one of these.
	str  *string
	num  *int
	list []string // rendered as a list of strings; empty is [ ]
}

func str(key, v string) confValue { return confValue{key: key, str: &v} }
func num(key string, v int) confValue {
	return confValue{key: key, num: &v}
}
func list(key string, v ...string) confValue {
	return confValue{key: key, list: append([]string{}, v...)}
}

// quote writes s as a virConf string. virConf has no escapes inside
// quotes, so a value holding the quote, a newline or a NUL cannot be
// written, and is refused naming its key.
func quote(key, s string) (string, error) {
	if strings.ContainsAny(s, "\"\n\r\x00") {
		return "", fmt.Errorf("libvirt config %s: value %q holds a double quote, newline or NUL, which virConf strings cannot", key, s)
	}
	return `"` + s + `"`, nil
}

// renderConf renders settings in order, one per line.
func renderConf(header string, settings []confValue) (string, error) {
	var b strings.Builder
	b.WriteString("# " + header + "\n")
	for _, s := range settings {
		var v string
		switch {
		case s.str != nil:
			q, err := quote(s.key, *s.str)
			if err != nil {
				return "", err
			}
			v = q
		case s.num != nil:
			v = fmt.Sprint(*s.num)
		default:
			items := make([]string, 0, len(s.list))
			for _, it := range s.list {
				q, err := quote(s.key, it)
				if err != nil {
					return "", err
				}
				items = append(items, q)
			}
			v = "[ " + strings.Join(items, ", ") + " ]"
			if len(items) == 0 {
				v = "[ ]"
			}
		}
		fmt.Fprintf(&b, "%s = %s\n", s.key, v)
	}
	return b.String(), nil
}

// libvirtdConf is a node's libvirtd.conf: its own host UUID (what libvirt
// compares to refuse a migration to the same host), the unix socket open
// to root without authentication, and a TCP listener on the node's
// address without authentication for migrations between nodes (the
// network is the test's own).
func libvirtdConf(hostUUID, addr string, tcpPort int) (string, error) {
	return renderConf("multinode test node: written by internal/testutil/multinode", []confValue{
		str("host_uuid", hostUUID),
		str("unix_sock_group", "root"),
		str("unix_sock_ro_perms", "0770"),
		str("unix_sock_rw_perms", "0770"),
		str("auth_unix_ro", "none"),
		str("auth_unix_rw", "none"),
		num("listen_tls", 0),
		num("listen_tcp", 1),
		str("listen_addr", addr),
		str("tcp_port", fmt.Sprint(tcpPort)),
		str("auth_tcp", "none"),
		str("log_outputs", "3:file:/var/log/libvirt/libvirtd.log"),
	})
}

// qemuConf is a node's qemu.conf: incoming migrations on the node's
// address in a port range of its own, and no cgroup controllers, since
// every libvirtd on the machine shares the cgroup tree and two QEMUs of
// one domain name would clash under /machine.
func qemuConf(addr string, portMin, portMax int) (string, error) {
	return renderConf("multinode test node: written by internal/testutil/multinode", []confValue{
		str("migration_address", addr),
		str("migration_host", addr),
		num("migration_port_min", portMin),
		num("migration_port_max", portMax),
		list("cgroup_controllers"),
	})
}
