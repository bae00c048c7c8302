package cloudinit

// Cross-checks with other people's ISO 9660 readers, each skipped when
// not installed (Debian packages genisoimage, libarchive-tools, p7zip-full,
// xorriso). They read the names through Rock Ridge, Joliet or both.

import (
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var toolSeeds = map[string]Seed{
	"full": testSeed,
	// Empty files have no extent; readers must cope.
	"minimal": {InstanceID: "iid-minimal"},
}

func seedFiles(t *testing.T, s Seed) map[string]string {
	t.Helper()
	md, err := s.MetaData()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"meta-data": md, "user-data": s.UserData}
	if s.NetworkConfig != "" {
		m["network-config"] = s.NetworkConfig
	}
	return m
}

func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s)", name, pkg)
	}
	return p
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// forEachSeed writes each seed to a file and runs check on it.
func forEachSeed(t *testing.T, check func(t *testing.T, iso string, want map[string]string)) {
	for name, s := range toolSeeds {
		t.Run(name, func(t *testing.T) {
			iso := filepath.Join(t.TempDir(), "seed.iso")
			if err := WriteNoCloudISO(iso, 0o644, s); err != nil {
				t.Fatal(err)
			}
			check(t, iso, seedFiles(t, s))
		})
	}
}

// readTree returns the regular files under dir by relative path, and
// makes dir writable again for t.TempDir's cleanup (extractors copy the
// image's read-only modes).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func compareFiles(t *testing.T, how string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: files = %q\nwant %q", how, got, want)
	}
}

func TestISOInfo(t *testing.T) {
	isoinfo := needTool(t, "isoinfo", "genisoimage")
	forEachSeed(t, func(t *testing.T, iso string, want map[string]string) {
		d := run(t, isoinfo, "-d", "-i", iso)
		for _, line := range []string{"Volume id: cidata", "Joliet with UCS level 3 found", "Rock Ridge signatures version 1 found"} {
			if !strings.Contains(d, line) {
				t.Errorf("isoinfo -d lacks %q:\n%s", line, d)
			}
		}
		for _, ext := range []string{"-R", "-J"} {
			listing := run(t, isoinfo, ext, "-f", "-i", iso)
			got := map[string]string{}
			for _, p := range strings.Fields(listing) {
				name := strings.TrimPrefix(p, "/")
				got[name] = run(t, isoinfo, ext, "-x", p, "-i", iso)
			}
			compareFiles(t, "isoinfo "+ext, got, want)
		}
	})
}

func TestBsdtar(t *testing.T) {
	bsdtar := needTool(t, "bsdtar", "libarchive-tools")
	forEachSeed(t, func(t *testing.T, iso string, want map[string]string) {
		// libarchive prefers Rock Ridge; with it turned off it reads Joliet.
		for _, opts := range []string{"iso9660:rockridge", "iso9660:!rockridge"} {
			dir := t.TempDir()
			run(t, bsdtar, "-x", "--options", opts, "-f", iso, "-C", dir)
			compareFiles(t, "bsdtar "+opts, readTree(t, dir), want)
		}
	})
}

func Test7z(t *testing.T) {
	sevenZ := needTool(t, "7z", "p7zip-full")
	forEachSeed(t, func(t *testing.T, iso string, want map[string]string) {
		dir := t.TempDir()
		run(t, sevenZ, "x", "-y", "-o"+dir, iso)
		compareFiles(t, "7z", readTree(t, dir), want)
	})
}

func TestXorriso(t *testing.T) {
	xorriso := needTool(t, "xorriso", "xorriso")
	forEachSeed(t, func(t *testing.T, iso string, want map[string]string) {
		dir := filepath.Join(t.TempDir(), "out")
		// Exit status 32 on any WARNING or worse: unknown SUSP entries,
		// bad Rock Ridge fields, a short image all count.
		out := run(t, xorriso, "-return_with", "WARNING", "32", "-indev", iso, "-osirrox", "on", "-extract", "/", dir)
		if !strings.Contains(out, "Volume id    : 'cidata'") {
			t.Errorf("xorriso does not report volume id cidata:\n%s", out)
		}
		if strings.Contains(out, " 0 data blocks") {
			t.Errorf("xorriso takes the image for blank media:\n%s", out)
		}
		compareFiles(t, "xorriso", readTree(t, dir), want)
	})
}
