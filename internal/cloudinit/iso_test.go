package cloudinit

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mustBuildISO(t *testing.T, files []isoFile, opt isoOptions) *parsedISO {
	t.Helper()
	img, err := buildISO(files, opt)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseISO(img)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fileMap(files []isoFile) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		m[f.name] = string(f.data)
	}
	return m
}

// Enough files to spill the directories over several sectors, with names
// that collide once cut to level 1.
func TestISOManyFiles(t *testing.T) {
	var files []isoFile
	for i := range 60 {
		files = append(files, isoFile{name: fmt.Sprintf("vendor-data-part-%02d.yaml", i), data: []byte(strings.Repeat("x", i*100))})
	}
	files = append(files,
		isoFile{name: "user-data", data: []byte("a")},
		isoFile{name: "user_data", data: []byte("b")},
		isoFile{name: "USER-DATA", data: []byte("c")},
		isoFile{name: "ünïcode-nämé", data: []byte("d")},
	)
	p := mustBuildISO(t, files, isoOptions{volumeID: "cidata", modTime: testTime})
	want := fileMap(files)
	if got := asStrings(p.rockRidge); !maps.Equal(got, want) {
		t.Errorf("Rock Ridge names differ:\n got %q\nwant %q", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if got := asStrings(p.joliet); !maps.Equal(got, want) {
		t.Errorf("Joliet names differ:\n got %q\nwant %q", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if len(p.plain) != len(files) {
		t.Errorf("%d distinct ISO 9660 identifiers for %d files", len(p.plain), len(files))
	}
}

// Each extension alone must carry the names: Linux picks Rock Ridge, but
// other readers (Windows, some firmware) only know Joliet.
func TestISOExtensionsAlone(t *testing.T) {
	files := []isoFile{{name: "meta-data", data: []byte("instance-id: x\n")}, {name: "user-data", data: []byte("#cloud-config\n")}}
	want := fileMap(files)

	p := mustBuildISO(t, files, isoOptions{volumeID: "cidata", modTime: testTime, noJoliet: true})
	if got := asStrings(p.rockRidge); !maps.Equal(got, want) || len(p.joliet) != 0 {
		t.Errorf("Rock Ridge only: rr %q, joliet %q", got, p.joliet)
	}
	p = mustBuildISO(t, files, isoOptions{volumeID: "cidata", modTime: testTime, noRockRidge: true})
	if got := asStrings(p.joliet); !maps.Equal(got, want) || len(p.rockRidge) != 0 || p.extensions != nil {
		t.Errorf("Joliet only: joliet %q, rr %q, extensions %q", got, p.rockRidge, p.extensions)
	}
	p = mustBuildISO(t, files, isoOptions{volumeID: "cidata", modTime: testTime, noRockRidge: true, noJoliet: true})
	if got := slices.Sorted(maps.Keys(p.plain)); !slices.Equal(got, []string{"META_DAT.;1", "USER_DAT.;1"}) {
		t.Errorf("plain: %q", got)
	}
}

func TestISODates(t *testing.T) {
	img, err := buildISO(nil, isoOptions{volumeID: "cidata", modTime: time.Date(2031, 12, 30, 23, 59, 58, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	pvd := img[16*sectorSize:]
	if got := string(pvd[813:829]); got != "2031123023595800" {
		t.Errorf("creation date %q", got)
	}
	if got := string(pvd[847:863]); got != "0000000000000000" {
		t.Errorf("expiration date %q, want unspecified", got)
	}
	// Root record date: years since 1900.
	if got := pvd[156+18 : 156+25]; !bytes.Equal(got, []byte{131, 12, 30, 23, 59, 58, 0}) {
		t.Errorf("root record date % x", got)
	}
}

func TestISORejects(t *testing.T) {
	ok := isoOptions{volumeID: "cidata", modTime: testTime}
	tests := []struct {
		name  string
		files []isoFile
		opt   isoOptions
		want  string
	}{
		{"slash", []isoFile{{name: "a/b"}}, ok, "must not contain"},
		{"semicolon", []isoFile{{name: "a;1"}}, ok, "must not contain"},
		{"dot", []isoFile{{name: ".."}}, ok, "invalid file name"},
		{"duplicate", []isoFile{{name: "a"}, {name: "a"}}, ok, "duplicate"},
		{"long", []isoFile{{name: strings.Repeat("a", 65)}}, ok, "Joliet characters"},
		{"no label", nil, isoOptions{modTime: testTime}, "volume identifier"},
		{"long label", nil, isoOptions{volumeID: strings.Repeat("x", 17), modTime: testTime}, "volume identifier"},
		{"year", nil, isoOptions{volumeID: "cidata", modTime: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}, "1900-2155"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildISO(tt.files, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLevel1Names(t *testing.T) {
	got := level1Names([]string{"meta-data", "user-data", "network-config", "vendor-data", "a.tar.gz", ".hidden", "user_data"})
	want := []string{"META_DAT.;1", "USER_DAT.;1", "NETWORK_.;1", "VENDOR_D.;1", "A_TAR.GZ;1", "_HIDDEN.;1", "USER_DA1.;1"}
	if !slices.Equal(got, want) {
		t.Errorf("level1Names = %q\nwant %q", got, want)
	}
}
