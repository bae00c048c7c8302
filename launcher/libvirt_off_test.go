//go:build !libvirt

package main

import (
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// A launcher built without the libvirt tag fails every command that needs
// libvirt at once, saying how to build one that works; the node agent
// started through go-plugin (the cookie set) gets the same answer.
func TestWithoutLibvirtFailsClearly(t *testing.T) {
	cookie := launcher.Handshake.MagicCookieKey + "=" + launcher.Handshake.MagicCookieValue
	for _, args := range [][]string{
		{"probe"},
		{"list-domains", "--libvirt-uri", "test:///default"},
		{"list-networks", "--libvirt-uri", "test:///default"},
		{"serve", "--domain-name", "default_web"},
		{}, // serve is the default
	} {
		code, stdout, stderr := runLauncher(t, []string{cookie}, args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "built without libvirt support: build with -tags libvirt / make build") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if code, stdout, _ := runLauncher(t, nil, "version"); code != 0 || stdout != "dev\n" {
		t.Errorf("version: exit %d, stdout %q", code, stdout)
	}
}
