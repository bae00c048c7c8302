package command

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

// runAgent runs virtplane-agent with args and returns stdout, stderr and
// the error.
func runAgent(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd, _ := newRootCommand(func(string) string { return "" })
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
}

func TestImageImportListRemove(t *testing.T) {
	needQemuImg(t)
	src := filepath.Join(t.TempDir(), "debian.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", src, "2G").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	hexSum := hex.EncodeToString(sum[:])
	dir := filepath.Join(t.TempDir(), "images")

	out, _, err := runAgent(t, "image", "import", "os/debian.qcow2", src, "--image-dir", dir, "--sha256", hexSum)
	if err != nil {
		t.Fatal(err)
	}
	if want := "image os/debian.qcow2 imported (qcow2, virtual size 2Gi, sha256 " + hexSum + ")\n"; out != want {
		t.Errorf("import printed %q, want %q", out, want)
	}

	_, _, err = runAgent(t, "image", "import", "os/debian.qcow2", src, "--image-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second import: err = %v, want already exists", err)
	}
	if _, _, err := runAgent(t, "image", "import", "os/debian.qcow2", src, "--image-dir", dir, "--replace"); err != nil {
		t.Errorf("import --replace: %v", err)
	}
	_, _, err = runAgent(t, "image", "import", "other.qcow2", src, "--image-dir", dir, "--sha256", strings.Repeat("0", 64))
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("import with a wrong --sha256: err = %v", err)
	}
	_, _, err = runAgent(t, "image", "import", "../escape.qcow2", src, "--image-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "invalid image name") {
		t.Errorf("import ../escape.qcow2: err = %v", err)
	}

	out, _, err = runAgent(t, "image", "list", "--image-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	size := formatBytes(int64(len(b)))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME FORMAT VIRTUAL-SIZE SIZE SHA256" ||
		strings.Join(strings.Fields(lines[1]), " ") != "os/debian.qcow2 qcow2 2Gi "+size+" "+hexSum[:12] {
		t.Errorf("image list printed:\n%s", out)
	}

	out, _, err = runAgent(t, "image", "ls", "--image-dir", dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string
		Items []imagestore.Image
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("image list -o json: %v\n%s", err, out)
	}
	if list.Kind != "ImageList" || len(list.Items) != 1 || list.Items[0].SHA256 != hexSum || list.Items[0].VirtualSize != 2<<30 {
		t.Errorf("image list -o json = %+v", list)
	}
	if !strings.Contains(out, `"virtual_size": 2147483648`) {
		t.Errorf("JSON does not use snake_case names:\n%s", out)
	}

	out, _, err = runAgent(t, "image", "rm", "os/debian.qcow2", "--image-dir", dir)
	if err != nil || out != "image os/debian.qcow2 removed\n" {
		t.Errorf("image rm: %q, %v", out, err)
	}
	_, errOut, err := runAgent(t, "image", "list", "--image-dir", dir)
	if err != nil || errOut != "No images found\n" {
		t.Errorf("list of an empty store: stderr %q, %v", errOut, err)
	}
}

func TestImageListReportsBrokenFiles(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	// An overlay dropped in by hand: listed, with the reason on stderr.
	if out, err := exec.Command("qemu-img", "create", "-u", "-f", "qcow2", "-b", "/elsewhere/base.qcow2", "-F", "qcow2", filepath.Join(dir, "overlay.qcow2"), "1G").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	out, errOut, err := runAgent(t, "image", "list", "--image-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) != 5 || f[0] != "overlay.qcow2" || f[1] != none || f[4] != none {
		t.Errorf("row for a broken image: %q", f)
	}
	if !strings.Contains(errOut, "warning: overlay.qcow2:") || !strings.Contains(errOut, "backing file") {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestImageCommandFlags(t *testing.T) {
	cmd, _ := newRootCommand(func(string) string { return "" })
	img, _, err := cmd.Find([]string{"image", "import"})
	if err != nil {
		t.Fatal(err)
	}
	if f := img.Flag("image-dir"); f == nil || f.DefValue != imagestore.DefaultDir {
		t.Errorf("--image-dir default = %v, want %s", f, imagestore.DefaultDir)
	}
	for _, name := range []string{"sha256", "replace", "format"} {
		if img.Flag(name) == nil {
			t.Errorf("image import has no --%s", name)
		}
	}
	if _, _, err := runAgent(t, "image", "import", "only-one-arg"); err == nil {
		t.Error("image import with one argument succeeded")
	}
	if _, _, err := runAgent(t, "image", "list", "--image-dir", t.TempDir(), "-o", "wide"); err == nil || !strings.Contains(err.Error(), "unsupported output format") {
		t.Errorf("image list -o wide: %v", err)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:                 "0",
		1023:              "1023",
		1024:              "1Ki",
		1536:              "1.5Ki",
		2 << 30:           "2Gi",
		3331584:           "3.2Mi",
		1<<30 - 1:         "1.0Gi",
		10 << 40:          "10Ti",
		1<<20 + 1:         "1.0Mi",
		2*1<<30 + 1<<29:   "2.5Gi",
		1 << 62:           "4Ei",
		1<<50 + 1<<49 + 1: "1.5Pi",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
