package ceph

import (
	"errors"
	"testing"
)

func TestParseImage(t *testing.T) {
	const owner, r = "6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f", "e1e1e1e1-0000-4000-8000-0000000000e1"
	for _, tc := range []struct {
		image string
		want  ImageName
	}{
		{VolumeImage(owner, "root"), ImageName{Kind: KindVolume, Owner: owner, Volume: "root"}},
		{StagedImage(owner, "root", r), ImageName{Kind: KindStaged, Owner: owner, Volume: "root", Restore: r}},
		{RetiredImage(owner, "data-1", r), ImageName{Kind: KindRetired, Owner: owner, Volume: "data-1", Restore: r}},
		{NVRAMImage(owner), ImageName{Kind: KindNVRAM, Owner: owner}},
		{BaseImage("ab"), ImageName{}},
		{"vm-" + owner + "-vol-", ImageName{}},
		{"vm-" + owner + "-vol-root.restore-short", ImageName{}},
		{"vm-" + owner + "-vol-root.other", ImageName{}},
		{"vm-" + owner + "-vol-.retired-" + r, ImageName{}},
		{"vm-" + owner + "-nvram.x", ImageName{}},
		{"vm-short-vol-root", ImageName{}},
		{"someone-elses", ImageName{}},
	} {
		if got := ParseImage(tc.image); got != tc.want {
			t.Errorf("ParseImage(%q) = %+v, want %+v", tc.image, got, tc.want)
		}
	}
	if got := SnapshotContentUID(SnapshotName(r)); got != r {
		t.Errorf("SnapshotContentUID(SnapshotName) = %q", got)
	}
	for _, s := range []string{"base", "snap-", "snap-x", "gold"} {
		if got := SnapshotContentUID(s); got != "" {
			t.Errorf("SnapshotContentUID(%q) = %q, want none", s, got)
		}
	}
}

func TestFindSnapshotTakesOnlyTheVolumesOwn(t *testing.T) {
	const a, b = "0a0a0a0a-0000-4000-8000-00000000000a", "0b0b0b0b-0000-4000-8000-00000000000b"
	const c1, r1 = "c1c1c1c1-0000-4000-8000-0000000000c1", "e1e1e1e1-0000-4000-8000-0000000000e1"
	snap := SnapshotName(c1)
	entries := []Entry{
		// The same snapshot name on another VM's image, on another
		// volume, on a staged image and on a foreign image: none is a's.
		{Image: VolumeImage(b, "root"), Snapshot: snap},
		{Image: VolumeImage(a, "data"), Snapshot: snap},
		{Image: StagedImage(a, "root", r1), Snapshot: snap},
		{Image: "vm-" + a + "-vol-root-copy", Snapshot: snap},
		{Image: VolumeImage(a, "root")},
	}
	if _, err := findSnapshot(entries, a, "root", c1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("found %v in others' images", err)
	}
	entries = append(entries, Entry{Image: RetiredImage(a, "root", r1), Snapshot: snap, Size: 5})
	s, err := findSnapshot(entries, a, "root", c1)
	if err != nil || s.Image != RetiredImage(a, "root", r1) || s.Size != 5 {
		t.Fatalf("findSnapshot = %+v, %v", s, err)
	}
}
