package export

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

const (
	testNode  = "n1"
	testNS    = "ns1"
	testToken = "the-token-of-the-export-made-by-the-test-0123"
)

// rig is a node's export server over real files, a real qemu-img and a
// real HTTPS listener, with the exports in an in-memory store and a fake
// clock.
type rig struct {
	t       testing.TB
	ctx     context.Context
	clock   *clocktesting.FakeClock
	exports *memstore.Store[*apiv1.VirtualMachineExport]
	srv     *Server
	layout  nodedir.Layout
	client  *http.Client
	addr    string
	volume  string // the source qcow2
	export  *apiv1.VirtualMachineExport
}

func needQemu(t testing.TB) {
	for _, b := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not found (Debian package qemu-utils)", b)
		}
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// newRig makes VM "vm1" with a 64 MiB qcow2 volume "data" holding two
// written stretches, an export of it Ready until an hour from now, and
// the node's server.
func newRig(t testing.TB) *rig {
	return newRigOf(t, "64M", "write -P 0xab 0 1M", "write -P 0x5c 40M 3M")
}

// newRigOf is newRig with a volume of size and qemu-io writes.
func newRigOf(t testing.TB, size string, writes ...string) *rig {
	t.Helper()
	needQemu(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	db := memstore.NewDB(clk.Now)
	r := &rig{t: t, ctx: ctx, clock: clk, exports: memstore.New(db, store.Exports), layout: nodedir.Layout{Root: t.TempDir()}}

	vmUID := uuid.NewString()
	if err := r.layout.EnsureVMDir(vmUID, testNS, "vm1"); err != nil {
		t.Fatal(err)
	}
	vmDir, _ := r.layout.VMDir(vmUID)
	if err := os.MkdirAll(nodedir.VolumesDir(vmDir), 0o700); err != nil {
		t.Fatal(err)
	}
	r.volume = filepath.Join(nodedir.VolumesDir(vmDir), "data.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", r.volume, size)
	qio := []string{"-f", "qcow2"}
	for _, w := range writes {
		qio = append(qio, "-c", w)
	}
	run(t, "qemu-io", append(qio, r.volume)...)

	port := testutil.FreePort(t, "tcp")
	r.addr = fmt.Sprintf("127.0.0.1:%d", port)
	cert, err := pki.EnsureExportCertificate(filepath.Join(t.TempDir(), "tls"), testNode, netip.MustParseAddr("127.0.0.1"), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cert.PEM)
	r.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableCompression: true}}

	e, err := r.exports.Create(ctx, &apiv1.VirtualMachineExport{
		Metadata: &apiv1.ObjectMeta{Namespace: testNS, Name: "ex", Labels: map[string]string{apiv1.LabelNodeName: testNode}},
		Spec:     &apiv1.VirtualMachineExportSpec{SourceKind: apiv1.KindVirtualMachine, SourceName: "vm1", TtlDuration: "1h"},
		Status: &apiv1.VirtualMachineExportStatus{
			Phase: apiv1.ExportReady, NodeName: testNode, SourceUid: vmUID,
			TokenSha256:    apiv1.ExportTokenHash(testToken),
			ExpirationTime: timestamppb.New(clk.Now().Add(time.Hour)),
			Volumes:        []*apiv1.ExportVolume{{Name: "data"}},
			CaCert:         string(cert.PEM),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.export = e
	srv, err := New(Options{NodeName: testNode, Watch: r.exports, Address: r.addr, Certificate: cert.TLS,
		Layout: r.layout, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	t.Cleanup(srv.Run(ctx))
	testutil.Eventually(t, 10*time.Second, "export served", func() bool {
		_, ok := srv.exportContext(e.GetMetadata().GetUid())
		return ok
	})
	return r
}

func (r *rig) url(volume, format string) string {
	return apiv1.ExportURL(r.addr, testNS, "ex", volume, format)
}

func (r *rig) get(url, token string, hdr ...string) *http.Response {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, url, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(apiv1.ExportTokenHeader, token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

func (r *rig) status(url, token string) (int, string) {
	r.t.Helper()
	resp := r.get(url, token)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// download writes the body of a 200 response to a file.
func (r *rig) download(url, file string) string {
	r.t.Helper()
	resp := r.get(url, testToken)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		r.t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	path := filepath.Join(r.t.TempDir(), file)
	f, err := os.Create(path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	n, err := io.Copy(f, resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		r.t.Fatalf("GET %s: %d of %d bytes", url, n, resp.ContentLength)
	}
	return path
}

// compare is qemu-img compare of the volume and a download.
func (r *rig) compare(format, path string) {
	r.t.Helper()
	out, err := exec.Command("qemu-img", "compare", "-f", "qcow2", "-F", format, r.volume, path).CombinedOutput()
	if err != nil {
		r.t.Fatalf("qemu-img compare (%s): %v: %s", format, err, out)
	}
	if !strings.Contains(string(out), "Images are identical") {
		r.t.Fatalf("qemu-img compare (%s): %s", format, out)
	}
}

func (r *rig) setExport(mutate func(*apiv1.VirtualMachineExport)) {
	r.t.Helper()
	cur, err := r.exports.Get(r.ctx, testNS, "ex")
	if err != nil {
		r.t.Fatal(err)
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineExport)
	mutate(next)
	if _, err := r.exports.Update(r.ctx, next); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) filesDir() string { return filepath.Join(Dir(r.layout), r.export.GetMetadata().GetUid()) }

func TestExportFormatsAreTheVolume(t *testing.T) {
	r := newRig(t)
	r.compare("qcow2", r.download(r.url("data", apiv1.ExportFormatQcow2), "d.qcow2"))
	raw := r.download(r.url("data", apiv1.ExportFormatRaw), "d.img")
	r.compare("raw", raw)

	// gzip is the raw image, streamed through the compressor.
	gz := r.download(r.url("data", apiv1.ExportFormatGzip), "d.img.gz")
	f, err := os.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	unzipped := filepath.Join(t.TempDir(), "unzipped.img")
	out, _ := os.Create(unzipped)
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	out.Close()
	r.compare("raw", unzipped)
	if fi, _ := os.Stat(gz); fi.Size() > 1<<20 {
		t.Errorf("gzip of a 64 MiB volume with 4 MiB of two bytes is %d bytes", fi.Size())
	}

	// A range of the raw image: the second written stretch.
	resp := r.get(r.url("data", apiv1.ExportFormatRaw), testToken, "Range", "bytes=41943040-41943049")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, bytes.Repeat([]byte{0x5c}, 10)) {
		t.Errorf("range: %s %x", resp.Status, b)
	}
}

func TestExportRefusals(t *testing.T) {
	r := newRig(t)
	for _, c := range []struct {
		name, url, token string
		want             int
	}{
		{"no token", r.url("data", "raw"), "", http.StatusUnauthorized},
		{"wrong token", r.url("data", "raw"), testToken + "x", http.StatusUnauthorized},
		{"unknown export", apiv1.ExportURL(r.addr, testNS, "other", "data", "raw"), testToken, http.StatusUnauthorized},
		{"other namespace", apiv1.ExportURL(r.addr, "ns2", "ex", "data", "raw"), testToken, http.StatusUnauthorized},
		{"unknown volume", r.url("nope", "raw"), testToken, http.StatusNotFound},
		{"not an export path", "https://" + r.addr + "/v1/exports/ns1/ex/volumes/../../x", testToken, http.StatusNotFound},
		{"unknown file", "https://" + r.addr + "/v1/exports/ns1/ex/volumes/data/disk.vmdk", testToken, http.StatusNotFound},
	} {
		if got, body := r.status(c.url, c.token); got != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, got, body, c.want)
		}
	}
}

// TestExportExpires: at the expiry by the node's clock, the token gets
// 403 and the export's files go, whatever the controller has written.
func TestExportExpires(t *testing.T) {
	r := newRig(t)
	r.download(r.url("data", apiv1.ExportFormatQcow2), "d.qcow2")
	if _, err := os.Stat(r.filesDir()); err != nil {
		t.Fatalf("export files: %v", err)
	}
	r.clock.Step(time.Hour)
	testutil.Eventually(t, 10*time.Second, "export files removed at expiry", func() bool {
		_, err := os.Stat(r.filesDir())
		return os.IsNotExist(err)
	})
	if got, body := r.status(r.url("data", "qcow2"), testToken); got != http.StatusForbidden || !strings.Contains(body, "expired") {
		t.Errorf("after expiry: %d %s, want 403 saying expired", got, body)
	}
	if got, _ := r.status(r.url("data", "qcow2"), "wrong"); got != http.StatusUnauthorized {
		t.Errorf("wrong token after expiry: %d, want 401", got)
	}
}

// TestExportTerminationCutsDownloads: the export turning Terminated (its
// VM started) cuts a download under way; the client sees a broken
// transfer, not a short one that looks whole.
func TestExportTerminationCutsDownloads(t *testing.T) {
	r := newRig(t)
	resp := r.get(r.url("data", apiv1.ExportFormatRaw), testToken)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", resp.Status)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	r.setExport(func(e *apiv1.VirtualMachineExport) {
		e.Status.Phase = apiv1.ExportTerminated
		e.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse, Reason: apiv1.ExportReasonVMStarted}}
	})
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Fatalf("download ended cleanly after %d more bytes of %d: want it cut", n, resp.ContentLength)
	}
	t.Logf("download cut after %d more bytes: %v", n, err)
	if got, body := r.status(r.url("data", "raw"), testToken); got != http.StatusForbidden || !strings.Contains(body, "VMStarted") {
		t.Errorf("after termination: %d %s, want 403 naming VMStarted", got, body)
	}
	testutil.Eventually(t, 10*time.Second, "export files removed", func() bool {
		_, err := os.Stat(r.filesDir())
		return os.IsNotExist(err)
	})
}

// TestExportDownloadsWithCurl: a plain client needs only the export's
// certificate (status.ca_cert) and its token, as with KubeVirt's.
func TestExportDownloadsWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not found")
	}
	r := newRig(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte(r.export.GetStatus().GetCaCert()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "d.qcow2")
	// The token goes in a header read from a file: never on a command line.
	hdr := filepath.Join(dir, "hdr")
	if err := os.WriteFile(hdr, []byte(apiv1.ExportTokenHeader+": "+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "curl", "-sSf", "--cacert", ca, "-H", "@"+hdr, "-o", out, r.url("data", apiv1.ExportFormatQcow2))
	r.compare("qcow2", out)
}

// TestExportBackToPendingStopsServing: an export the controller takes
// back to Pending (its VM was deleted) is no longer served.
func TestExportBackToPendingStopsServing(t *testing.T) {
	r := newRig(t)
	r.download(r.url("data", apiv1.ExportFormatQcow2), "d.qcow2")
	r.setExport(func(e *apiv1.VirtualMachineExport) {
		e.Status.Phase = apiv1.ExportPending
		e.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse, Reason: apiv1.ExportReasonSourceGone}}
	})
	testutil.Eventually(t, 10*time.Second, "export files removed", func() bool {
		_, err := os.Stat(r.filesDir())
		return os.IsNotExist(err)
	})
	if got, body := r.status(r.url("data", "qcow2"), testToken); got != http.StatusForbidden {
		t.Errorf("Pending export: %d %s, want 403", got, body)
	}
}
