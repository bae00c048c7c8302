package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestExportOfAStoppedVM is issue 35's export acceptance, on the real
// agent binaries, libvirtd and QEMU: a stopped VM's volume downloaded by
// `export download` as qcow2, raw and gzip is identical to the volume
// (qemu-img compare), and so is a snapshot's; a wrong token gets 401, an
// expired export 403; starting the VM ends its export, cutting a download
// under way, and the token gets 403 from then on.
func TestExportOfAStoppedVM(t *testing.T) {
	t.Parallel()
	exportAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "tcp"))
	c := newCluster(t, clusterOptions{agentArgs: []string{"--export-address", exportAddr}})
	n, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: c.node})
	c.must(err)
	if n.GetStatus().GetExportAddress() != exportAddr || !strings.Contains(n.GetStatus().GetExportCertificate(), "BEGIN CERTIFICATE") {
		t.Fatalf("node registered export address %q and certificate %q", n.GetStatus().GetExportAddress(), n.GetStatus().GetExportCertificate())
	}

	c.create(c.counterVM("counter", apiv1.RunStrategyAlways, "", "64Mi"))
	if _, _, _, wrote := c.boot("counter", ""); wrote != "1" {
		t.Fatalf("first boot wrote %q", wrote)
	}
	// An export of a running VM waits.
	c.cliMust("export", "create", "counter", "--name", "early")
	testutil.Eventually(t, stateTimeout, "export early Pending as the VM runs", func() bool {
		e := c.getExport("early")
		return e.GetStatus().GetPhase() == apiv1.ExportPending && readyReason(e) == apiv1.ExportReasonVMRunning
	})
	c.stopVM("counter")
	testutil.Eventually(t, stateTimeout, "export early Ready once the VM stopped", func() bool {
		return c.getExport("early").GetStatus().GetPhase() == apiv1.ExportReady
	})
	// One that expires in a minute, checked below.
	shortToken := filepath.Join(t.TempDir(), "short.token")
	c.cliMust("export", "create", "counter", "--name", "short", "--ttl", "1m", "--export-token-file", shortToken, "--wait")
	madeShort := time.Now()

	vmUID := c.vm("counter").GetMetadata().GetUid()
	volume := filepath.Join(c.nodeDir, "vms", vmUID, "volumes", "data.qcow2")
	dir := t.TempDir()
	for _, d := range []struct{ file, format string }{{"data.qcow2", "qcow2"}, {"data.img", "raw"}, {"data.img.gz", "gzip"}} {
		out := filepath.Join(dir, d.file)
		began := time.Now()
		stdout, stderr := c.cliMust("export", "download", "counter", "--name", "dl-"+d.format, "--volume", "data", "--output", out)
		t.Logf("download %s in %s: %s%s", d.format, time.Since(began).Round(time.Millisecond), stdout, lastLine(stderr))
		if !strings.Contains(stderr, "/s") {
			t.Errorf("download %s printed no progress: %q", d.format, stderr)
		}
		check, format := out, d.format
		if d.format == "gzip" {
			check, format = gunzip(t, out), "raw"
		}
		imagesIdentical(t, volume, check, format)
		if _, err := c.api.Exports.Get(c.ctx, &apiv1.GetExportRequest{Key: c.key("dl-" + d.format)}); err == nil {
			t.Errorf("export dl-%s outlived its download", d.format)
		}
	}

	// A snapshot's copy, served from the node's snapshot directory.
	snap := c.mustSnapshot("at-stop", "counter")
	content, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(snap.GetStatus().GetContentName())})
	c.must(err)
	var snapCopy string
	for _, b := range content.GetStatus().GetVolumeBackups() {
		if b.GetVolumeName() == "data" {
			snapCopy = b.GetPath()
		}
	}
	snapOut := filepath.Join(dir, "snap.qcow2")
	c.cliMust("export", "download", "counter", "--snapshot", "at-stop", "--volume", "data", "--output", snapOut)
	imagesIdentical(t, snapCopy, snapOut, "qcow2")

	// A kept export: a wrong token is 401.
	keptToken := filepath.Join(t.TempDir(), "kept.token")
	c.cliMust("export", "create", "counter", "--name", "kept", "--export-token-file", keptToken, "--wait")
	kept := c.getExport("kept")
	hc := exportClient(t, kept.GetStatus().GetCaCert())
	link := kept.Link("data", apiv1.ExportFormatRaw)
	token := readToken(t, keptToken)
	if code := exportGet(t, hc, link, "not-the-token", nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code := exportGet(t, hc, link, "", nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}

	// The short export expires: its token gets 403.
	testutil.Eventually(t, time.Minute+stateTimeout-time.Since(madeShort), "export short expired", func() bool {
		e := c.getExport("short")
		return e.GetStatus().GetPhase() == apiv1.ExportTerminated && readyReason(e) == apiv1.ExportReasonExpired
	})
	short := c.getExport("short")
	if code := exportGet(t, hc, short.Link("data", apiv1.ExportFormatRaw), readToken(t, shortToken), nil); code != http.StatusForbidden {
		t.Errorf("expired export: %d, want 403", code)
	}

	// Starting the VM ends the kept export and cuts a download under way.
	cut := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		exportGet(t, hc, link, token, func(body io.Reader) {
			_, err := io.ReadFull(body, make([]byte, 4096))
			close(started)
			if err == nil {
				// Slowly: the download is under way when the VM starts.
				buf := make([]byte, 4096)
				for err == nil {
					_, err = body.Read(buf)
					time.Sleep(20 * time.Millisecond)
				}
			}
			cut <- err
		})
	}()
	<-started
	c.startVM("counter")
	testutil.Eventually(t, stateTimeout, "export kept Terminated by the VM's start", func() bool {
		e := c.getExport("kept")
		return e.GetStatus().GetPhase() == apiv1.ExportTerminated && readyReason(e) == apiv1.ExportReasonVMStarted
	})
	select {
	case err := <-cut:
		if err == io.EOF {
			t.Errorf("the download under way ended cleanly: want it cut")
		} else {
			t.Logf("download under way cut: %v", err)
		}
	case <-time.After(stateTimeout):
		t.Error("the download under way was not cut")
	}
	if code := exportGet(t, hc, link, token, nil); code != http.StatusForbidden {
		t.Errorf("after the VM started: %d, want 403", code)
	}
	testutil.Eventually(t, stateTimeout, "the node removed the kept export's files", func() bool {
		_, err := os.Stat(filepath.Join(c.nodeDir, "exports", kept.GetMetadata().GetUid()))
		return os.IsNotExist(err)
	})
	c.boot("counter", "")
}

func (c *cluster) getExport(name string) *apiv1.VirtualMachineExport {
	c.t.Helper()
	e, err := c.api.Exports.Get(c.ctx, &apiv1.GetExportRequest{Key: c.key(name)})
	c.must(err)
	return e
}

func readyReason(e *apiv1.VirtualMachineExport) string {
	return apiv1.FindCondition(e.GetStatus().GetConditions(), apiv1.ConditionReady).GetReason()
}

// cliMust runs the agent binary and fails the test when it fails.
func (c *cluster) cliMust(args ...string) (stdout, stderr string) {
	c.t.Helper()
	stdout, stderr, err := c.cliRun(args...)
	if err != nil {
		c.t.Fatalf("virtplane-agent %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout, stderr
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	return strings.TrimSpace(string(b))
}

// exportClient trusts the export's certificate alone.
func exportClient(t *testing.T, caPEM string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatalf("export ca_cert %q is no certificate", caPEM)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// exportGet GETs link with token and returns the status; read, when set,
// gets the body of a 200.
func exportGet(t *testing.T, hc *http.Client, link, token string, read func(io.Reader)) int {
	req, err := http.NewRequest(http.MethodGet, link, nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	if token != "" {
		req.Header.Set(apiv1.ExportTokenHeader, token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", link, err)
		return 0
	}
	defer resp.Body.Close()
	if read != nil && resp.StatusCode == http.StatusOK {
		read(resp.Body)
	}
	return resp.StatusCode
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := path + ".raw"
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := io.Copy(w, zr); err != nil {
		t.Fatal(err)
	}
	return out
}

// imagesIdentical is qemu-img compare of a qcow2 volume and a download.
func imagesIdentical(t *testing.T, volume, download, format string) {
	t.Helper()
	out, err := exec.Command("qemu-img", "compare", "-U", "-f", "qcow2", "-F", format, volume, download).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Images are identical") {
		t.Fatalf("qemu-img compare %s %s (%s): %v: %s", volume, download, format, err, out)
	}
}

// imagesIdenticalAs is qemu-img compare of two images of given formats.
func imagesIdenticalAs(t *testing.T, a, aFormat, b, bFormat string) {
	t.Helper()
	out, err := exec.Command("qemu-img", "compare", "-U", "-f", aFormat, "-F", bFormat, a, b).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Images are identical") {
		t.Fatalf("qemu-img compare %s %s: %v: %s", a, b, err, out)
	}
}
