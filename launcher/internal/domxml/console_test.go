package domxml

import (
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

func TestSerialPty(t *testing.T) {
	// Shaped like libvirt's live XML of a running domain built by Build.
	live := `<domain type='qemu' id='3'><name>ns_web</name><devices>
  <serial type='pty'>
    <source path='/dev/pts/4'/>
    <log file='/var/lib/virtplane/vmis/u1/console.log' append='on'/>
    <target type='isa-serial' port='0'><model name='isa-serial'/></target>
    <alias name='serial0'/>
  </serial>
  <console type='pty' tty='/dev/pts/4'>
    <source path='/dev/pts/4'/>
    <target type='serial' port='0'/>
    <alias name='serial0'/>
  </console>
</devices></domain>`
	consoleOnly := `<domain type='qemu'><name>x</name><devices>
  <console type='pty' tty='/dev/pts/9'><target type='serial' port='0'/></console>
</devices></domain>`
	defined, err := Build(testVMI("128Mi"), &launcherpb.SyncOptions{DomainName: "default_web", ConsoleLogPath: "/tmp/console.log"})
	if err != nil {
		t.Fatal(err)
	}
	definedXML, err := defined.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, xml, want string
	}{
		{"live", live, "/dev/pts/4"},
		{"console tty only", consoleOnly, "/dev/pts/9"},
		{"defined, not running", definedXML, ""},
		{"no devices", `<domain type='qemu'><name>x</name></domain>`, ""},
	} {
		got, err := SerialPty(tc.xml)
		if err != nil || got != tc.want {
			t.Errorf("%s: SerialPty = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := SerialPty("<domain"); err == nil {
		t.Error("SerialPty of broken XML: no error")
	}
}
