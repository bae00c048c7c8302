package adoption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/adopt"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

const (
	domainUUID = "6f1c2a3e-0000-4000-8000-00000000d001"
	vmUID      = "6f1c2a3e-0000-4000-8000-00000000e001"
	vmiUID     = "6f1c2a3e-0000-4000-8000-00000000f001"
	adoptUID   = "6f1c2a3e-0000-4000-8000-00000000a001"
)

// fakeAPI answers Get with the adoption it holds.
type fakeAPI struct {
	API
	a *apiv1.VirtualMachineAdoption
}

func (f *fakeAPI) Get(context.Context, *apiv1.GetAdoptionRequest, ...grpc.CallOption) (*apiv1.VirtualMachineAdoption, error) {
	return f.a, nil
}

type fakeInspector struct{ facts launcher.DomainFacts }

func (f *fakeInspector) InspectDomain(context.Context, string) (launcher.DomainFacts, error) {
	return f.facts, nil
}

// fakeFiles is qemu-img's word on each file, by path.
type fakeFiles map[string]disks.FileInfo

func (f fakeFiles) InfoAs(_ context.Context, path, format string) (disks.FileInfo, error) {
	info, ok := f[path]
	if !ok {
		return disks.FileInfo{}, errors.New("no such file")
	}
	return info, nil
}

type env struct {
	role    *Role
	api     *fakeAPI
	inspect *fakeInspector
	files   fakeFiles
	adopt   string // the allowed directory
	outside string
	layout  nodedir.Layout
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{adopt: filepath.Join(root, "adopt"), outside: filepath.Join(root, "outside"), files: fakeFiles{},
		layout: nodedir.Layout{Root: filepath.Join(root, "node")}}
	for _, d := range []string{e.adopt, e.outside, e.layout.Root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := adopt.CheckDirs([]string{e.adopt}, e.layout.Root)
	if err != nil {
		t.Fatal(err)
	}
	e.adopt = dirs[0]
	e.api = &fakeAPI{a: &apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: adoptUID},
		Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: "node-a", DomainName: "legacy", RunStrategy: apiv1.RunStrategyAlways},
	}}
	e.inspect = &fakeInspector{}
	e.role = New(Options{NodeName: "node-a", API: e.api, Inspect: e.inspect, Files: e.files, Layout: e.layout,
		Dirs: dirs, ImageDir: filepath.Join(root, "images"), CallTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	return e
}

// domain makes the running domain "legacy" with one raw disk at path,
// which exists as a file of 1 MiB (qemu-img says so).
func (e *env) domain(t *testing.T, path string) {
	t.Helper()
	e.inspect.facts = launcher.DomainFacts{Name: "legacy", UUID: domainUUID, State: "Running", Reason: "Booted", Persistent: true, QEMUPid: 4242,
		XML: `<domain type='qemu'><name>legacy</name><memory unit='MiB'>160</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>
<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='` + path + `'/><target dev='vda' bus='virtio'/></disk>
<serial type='pty'><source path='/dev/pts/9'/></serial></devices></domain>`}
	e.files[path] = disks.FileInfo{Format: "raw", VirtualSize: 1 << 20}
}

func writeFile(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, make([]byte, 512), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The mapping of a domain whose disk is in the allowed directory: the VM
// as the API takes it, sized by qemu-img's word.
func TestMapDomain(t *testing.T) {
	e := newEnv(t)
	disk := filepath.Join(e.adopt, "data.raw")
	writeFile(t, disk)
	e.domain(t, disk)
	m := e.role.mapDomain(context.Background(), e.api.a)
	if len(m.status.GetRefusals()) > 0 {
		t.Fatalf("refusals %v", m.status.GetRefusals())
	}
	st := m.status
	if st.GetDomainUuid() != domainUUID || st.GetQemuPid() != 4242 || len(st.GetDisks()) != 1 || st.GetDisks()[0].GetPath() != disk || st.GetDisks()[0].GetVirtualSizeBytes() != 1<<20 {
		t.Errorf("status %v", st)
	}
	if got := st.GetSpec().GetVolumes()[0].GetPersistent().GetSize(); got != "1Mi" {
		t.Errorf("volume size %q, want 1Mi (defaulted canonical)", got)
	}
	if st.GetSpec().GetTerminationGracePeriodSeconds() != apiv1.DefaultTerminationGracePeriodSeconds {
		t.Errorf("the spec is not defaulted as the API would: %v", st.GetSpec())
	}
}

// What the domain XML says of a disk is checked on the disk itself.
func TestMapDomainRefusesWhatTheFilesAre(t *testing.T) {
	for name, c := range map[string]struct {
		setup func(e *env) string // the disk's path in the domain
		want  string
	}{
		"a symlink out of the directory": {func(e *env) string {
			secret := filepath.Join(e.outside, "secret")
			writeFile(t, secret)
			link := filepath.Join(e.adopt, "link.raw")
			if err := os.Symlink(secret, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "outside the directories"},
		"a directory": {func(e *env) string {
			d := filepath.Join(e.adopt, "dir")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}, "not a regular file"},
		"a qcow2 backing chain": {func(e *env) string {
			p := filepath.Join(e.adopt, "child.raw")
			writeFile(t, p)
			e.domain(t, p)
			e.files[p] = disks.FileInfo{Format: "raw", VirtualSize: 1, BackingFile: "/etc/passwd"}
			return p
		}, "backing file /etc/passwd"},
		"another format than declared": {func(e *env) string {
			p := filepath.Join(e.adopt, "fake.raw")
			writeFile(t, p)
			e.domain(t, p)
			e.files[p] = disks.FileInfo{Format: "qcow2", VirtualSize: 1}
			return p
		}, "reads it as qcow2"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := c.setup(e)
			if e.inspect.facts.XML == "" || !strings.Contains(e.inspect.facts.XML, p) {
				info, ok := e.files[p]
				e.domain(t, p)
				if ok {
					e.files[p] = info
				}
			}
			m := e.role.mapDomain(context.Background(), e.api.a)
			var got []string
			for _, r := range m.status.GetRefusals() {
				got = append(got, r.GetElement()+": "+r.GetReason())
			}
			if !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Errorf("refusals %q, want one saying %q", got, c.want)
			}
			if len(m.status.GetDisks()) > 0 {
				t.Errorf("a refused disk is reported: %v", m.status.GetDisks())
			}
		})
	}
}

// The domain itself: managed already, transient, paused.
func TestMapDomainRefusesTheDomain(t *testing.T) {
	for want, change := range map[string]func(f *launcher.DomainFacts){
		"manages it already": func(f *launcher.DomainFacts) { f.Managed = true },
		"transient":          func(f *launcher.DomainFacts) { f.Persistent = false },
		"it is Paused":       func(f *launcher.DomainFacts) { f.State, f.Reason = "Paused", "User" },
		"libvirt snapshot":   func(f *launcher.DomainFacts) { f.Snapshots = 2 },
		"managed save image": func(f *launcher.DomainFacts) { f.State, f.ManagedSave = "Shutoff", true },
	} {
		e := newEnv(t)
		disk := filepath.Join(e.adopt, "data.raw")
		writeFile(t, disk)
		e.domain(t, disk)
		change(&e.inspect.facts)
		m := e.role.mapDomain(context.Background(), e.api.a)
		if len(m.status.GetRefusals()) == 0 || !strings.Contains(m.status.GetRefusals()[0].GetReason(), want) {
			t.Errorf("refusals %v, want %q", m.status.GetRefusals(), want)
		}
	}
}

func adoptedVMI(uid string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: uid,
			Annotations: map[string]string{apiv1.AnnotationAdoption: adoptUID}},
		Spec: &apiv1.VirtualMachineInstanceSpec{Volumes: []*apiv1.Volume{{Name: "vda", Persistent: &apiv1.PersistentVolume{Size: "1Mi"}}}},
	}
}

// The first instance claims the domain the node reported, once; later
// instances copy the recorded files (Volume), checked again.
func TestClaimAndVolumes(t *testing.T) {
	e := newEnv(t)
	disk := filepath.Join(e.adopt, "data.raw")
	writeFile(t, disk)
	e.domain(t, disk)
	e.api.a.Status = &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionAdopting, VmUid: vmUID, DomainUuid: domainUUID}
	ctx := context.Background()

	c, err := e.role.Claim(ctx, adoptedVMI(vmiUID), vmUID)
	if err != nil || c == nil || c.Domain != "legacy" || c.UUID != domainUUID {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	// Again for the same instance (an agent restart): the same claim,
	// from the record.
	e.inspect.facts.UUID = "6f1c2a3e-0000-4000-8000-0000000000ff"
	if c2, err := e.role.Claim(ctx, adoptedVMI(vmiUID), vmUID); err != nil || c2 == nil || c2.UUID != domainUUID {
		t.Fatalf("second Claim = %+v, %v", c2, err)
	}
	// A later instance does not take anything over...
	if c3, err := e.role.Claim(ctx, adoptedVMI("6f1c2a3e-0000-4000-8000-00000000f002"), vmUID); err != nil || c3 != nil {
		t.Fatalf("a later instance's Claim = %+v, %v", c3, err)
	}
	// ...it copies its volume from the recorded file.
	if p, format, ok, err := e.role.Volume(vmUID, "vda"); err != nil || !ok || p != disk || format != "raw" {
		t.Errorf("Volume = %q %q %v %v", p, format, ok, err)
	}
	if _, _, ok, err := e.role.Volume(vmUID, "vdb"); ok || err != nil {
		t.Errorf("Volume of a disk the domain had not: %v %v", ok, err)
	}
	// The file replaced by a link out of the directory is refused when
	// read, whatever the record says.
	secret := filepath.Join(e.outside, "secret")
	writeFile(t, secret)
	if err := os.Remove(disk); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, disk); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := e.role.Volume(vmUID, "vda"); !errors.Is(err, adopt.ErrNotAdoptable) {
		t.Errorf("Volume of a file now linked outside: %v", err)
	}
	// The take-over reported.
	if err := e.role.TookOver(vmUID, vmiUID, 4242); err != nil {
		t.Fatal(err)
	}
	dir, _ := e.layout.VMDir(vmUID)
	if rec, err := readRecord(dir); err != nil || rec.State != stateTaken || rec.QEMUPid != 4242 {
		t.Errorf("record %+v, %v", rec, err)
	}
}

// A claim refuses a domain that is not the one reported, and an adoption
// that is not at its take-over; the refusal is recorded for the
// adoption's report.
func TestClaimRefusals(t *testing.T) {
	e := newEnv(t)
	disk := filepath.Join(e.adopt, "data.raw")
	writeFile(t, disk)
	e.domain(t, disk)
	ctx := context.Background()
	e.api.a.Status = &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionMapped, VmUid: vmUID, DomainUuid: domainUUID}
	_, err := e.role.Claim(ctx, adoptedVMI(vmiUID), vmUID)
	if r := (*RefusedError)(nil); !errors.As(err, &r) || !strings.Contains(r.Reason, "not Adopting") {
		t.Errorf("Claim of an adoption not Adopting: %v", err)
	}
	e.api.a.Status.Phase = apiv1.AdoptionAdopting
	e.inspect.facts.UUID = "6f1c2a3e-0000-4000-8000-0000000000ff"
	_, err = e.role.Claim(ctx, adoptedVMI(vmiUID), vmUID)
	if r := (*RefusedError)(nil); !errors.As(err, &r) || !strings.Contains(r.Reason, "not the domain") {
		t.Errorf("Claim of another domain of the name: %v", err)
	}
	dir, _ := e.layout.VMDir(vmUID)
	if rec, err := readRecord(dir); err != nil || rec.State != stateFailed {
		t.Errorf("record %+v, %v", rec, err)
	}
	// A VMI naming another adoption is refused.
	other := adoptedVMI("6f1c2a3e-0000-4000-8000-00000000f003")
	other.Metadata.Annotations[apiv1.AnnotationAdoption] = "6f1c2a3e-0000-4000-8000-00000000a0ff"
	if _, err := e.role.Claim(ctx, other, "6f1c2a3e-0000-4000-8000-00000000e0ff"); err == nil {
		t.Error("a VMI naming another adoption was not refused")
	}
}

// A domain with more to say than the API takes of a node (hundreds of
// unknown devices, empty drives, disks) is still reported, within the
// API's bounds: refused, with the rest counted, never a status the API
// refuses (which would leave the adoption Pending for good).
func TestMapDomainReportWithinTheAPIsBounds(t *testing.T) {
	e := newEnv(t)
	var devs strings.Builder
	for i := range 300 {
		devs.WriteString("<hostdev mode='subsystem' type='usb'/>")
		fmt.Fprintf(&devs, "<disk type='file' device='cdrom'><target dev='hd%d' bus='sata'/></disk>", i)
	}
	for i := range 70 {
		p := filepath.Join(e.adopt, fmt.Sprintf("d%d.raw", i))
		writeFile(t, p)
		e.files[p] = disks.FileInfo{Format: "raw", VirtualSize: 1 << 20}
		fmt.Fprintf(&devs, "<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%s'/><target dev='vd%d' bus='virtio'/></disk>", p, i)
	}
	e.inspect.facts = launcher.DomainFacts{Name: "legacy", UUID: domainUUID, State: "Running", Persistent: true,
		XML: `<domain type='qemu'><name>legacy</name><memory unit='MiB'>160</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>` +
			devs.String() + `</devices></domain>`}
	st := e.role.mapDomain(context.Background(), e.api.a).status
	if errs := validation.ValidateAdoptionStatus(st, field.NewPath("status")); len(errs) > 0 {
		t.Fatalf("the node's report is one the API refuses: %v", errs.ToAggregate())
	}
	rs := st.GetRefusals()
	if len(rs) != validation.MaxAdoptionItems || !strings.Contains(rs[len(rs)-1].GetReason(), "more refusals not listed") {
		t.Errorf("%d refusals, the last %v; want %d, the last counting the rest", len(rs), rs[len(rs)-1], validation.MaxAdoptionItems)
	}
	if ns := st.GetNotes(); len(ns) != validation.MaxAdoptionItems || !strings.Contains(ns[len(ns)-1], "more notes not listed") {
		t.Errorf("%d notes, the last %q", len(ns), ns[len(ns)-1])
	}
}

// The record is read back bounded: a file larger than any record is an
// error, not a megabytes-long read into memory.
func TestReadRecordBounded(t *testing.T) {
	dir := t.TempDir()
	if err := writeRecord(dir, &Record{Adoption: adoptUID, VMUID: vmUID, State: stateClaimed}); err != nil {
		t.Fatal(err)
	}
	if r, err := readRecord(dir); err != nil || r.Adoption != adoptUID || r.State != stateClaimed {
		t.Fatalf("read back %+v, %v", r, err)
	}
	big := `{"adoption":"` + strings.Repeat("a", maxRecord) + `"}`
	if err := os.WriteFile(filepath.Join(dir, recordFile), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := readRecord(dir); err == nil {
		t.Fatalf("a record of %d bytes read: %d bytes of adoption uid", len(big), len(r.Adoption))
	}
}
