package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/target"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// backupVM is the test guest with an rbd volume "data" (vda, rbdSize)
// and a local volume "local" (vdb) that carries its boot counter.
func (c *mnCluster) backupVM(name, class, rbdSize string) *apiv1.VirtualMachine {
	vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel,
		testguest.Cmdline(testguest.Hostname("vp-"+name), testguest.Persist("/dev/vdb")))
	return withDisks(vm,
		[]*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}, {Name: "local", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
		[]*apiv1.Volume{
			{Name: "data", Persistent: &apiv1.PersistentVolume{Size: rbdSize, StorageClass: class}},
			{Name: "local", Persistent: &apiv1.PersistentVolume{Size: "16Mi"}},
		})
}

// scheduled is one backup a schedule made, and the boot counter the VM
// had written when it was taken.
type scheduled struct {
	name, id string
	counter  string
	volumes  []*apiv1.BackupVolumeStatus
}

// TestBackupScheduleKeepsTwoAndRestoresElsewhere is issue 35's first two
// acceptance points. A VM with an rbd volume and a local one (its boot
// counter) is backed up three times by a schedule with keep_last 2 to an
// S3 bucket on radosgw; exactly two backups remain in the bucket; the
// second and third are incremental (bytes written far below the volumes'
// size, logged). The VM's node is removed for good; the second backup is
// restored onto the other node and boots with that backup's counter, its
// rbd volume the same bytes. A second virtplane cluster pointed at the
// same bucket lists the backups (written by the first) and restores one
// too. A truncated and an altered object in the bucket are each found at
// restore with a clear error, and the failed restores leave nothing.
func TestBackupScheduleKeepsTwoAndRestoresElsewhere(t *testing.T) {
	t.Parallel()
	a := newMultiNodeCluster(t, mnOptions{nodes: 2, ceph: true, serverArgs: []string{"--cluster-name", "cluster-a"}})
	class, pool := a.rbdClassOwnPool("ceph")
	bucket := newS3Bucket(t, a.ctx, a.ns)
	bucket.target(a, "s3", "shared")

	// The rbd volume starts as 32 MiB of random bytes (imported before
	// the first start: the node takes an image it finds), so that a full
	// backup has data to send and an incremental one has none to resend;
	// its bytes are compared after the restore. The local volume has the
	// boot counter.
	vm := a.backupVM("db", class, "256Mi")
	vm.Spec.RunStrategy = apiv1.RunStrategyHalted
	a.create(vm)
	vmUID := a.vm("db").GetMetadata().GetUid()
	image := ceph.VolumeImage(vmUID, "data")
	random := filepath.Join(t.TempDir(), "random.raw")
	data := make([]byte, 32<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(random, data, 0o600); err != nil {
		t.Fatal(err)
	}
	pool.rbd(t, "import", "--no-progress", random, pool.name+"/"+image)
	pool.rbd(t, "resize", "--no-progress", "--size", "256M", pool.name+"/"+image)
	rbdSum := imageSHA256(t, pool, image)
	a.setRunning("db", true)
	_, home, _, wrote := a.bootAnywhere("db", "")
	if wrote != "1" {
		t.Fatalf("first boot wrote %q", wrote)
	}
	t.Logf("VM db on %s, boot counter %s, rbd volume sha256 %s", home.Name, wrote, rbdSum[:12])

	// The schedule, suspended between backups so each takes a known
	// counter: unsuspended, it backs up at its next minute (or at once
	// for a time missed while suspended: one backup, not one per time),
	// and it is suspended again long before the minute after.
	if _, err := a.api.BackupSchedules.Create(a.ctx, &apiv1.CreateBackupScheduleRequest{BackupSchedule: &apiv1.VirtualMachineBackupSchedule{
		Metadata: &apiv1.ObjectMeta{Namespace: a.ns, Name: "db-nightly"},
		Spec: &apiv1.VirtualMachineBackupScheduleSpec{Source: "db", Target: "s3", Schedule: "@every 1m", Suspend: true,
			Retention: &apiv1.BackupRetention{KeepLast: 2}},
	}}); err != nil {
		t.Fatal(err)
	}
	setSuspend := func(s bool) {
		t.Helper()
		testutil.EventuallyNoError(t, stateTimeout, "schedule suspend="+fmt.Sprint(s), func() error {
			cur, err := a.api.BackupSchedules.Get(a.ctx, &apiv1.GetBackupScheduleRequest{Key: a.key("db-nightly")})
			if err != nil {
				return err
			}
			next := proto.Clone(cur).(*apiv1.VirtualMachineBackupSchedule)
			next.Spec.Suspend = s
			_, err = a.api.BackupSchedules.Update(a.ctx, &apiv1.UpdateBackupScheduleRequest{BackupSchedule: next})
			return err
		})
	}
	var taken []scheduled
	for i := range 3 {
		counter := wrote
		before := time.Now()
		known := map[string]bool{}
		for _, b := range taken {
			known[b.name] = true
		}
		setSuspend(false)
		var b *apiv1.VirtualMachineBackup
		testutil.Eventually(t, backupTimeout, fmt.Sprintf("scheduled backup %d succeeded", i+1), func() bool {
			list, err := a.api.Backups.List(a.ctx, &apiv1.ListBackupsRequest{Options: &apiv1.ListOptions{Namespace: a.ns, LabelSelector: apiv1.LabelBackupSchedule + "=db-nightly"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range list.GetItems() {
				if known[it.GetMetadata().GetName()] {
					continue
				}
				if it.GetStatus().GetPhase() == apiv1.BackupFailed {
					t.Fatalf("backup %s failed: %s", it.GetMetadata().GetName(), it.GetStatus().GetError())
				}
				if it.GetStatus().GetPhase() == apiv1.BackupSucceeded {
					b = it
					return true
				}
			}
			return false
		})
		setSuspend(true)
		st := b.GetStatus()
		taken = append(taken, scheduled{name: b.GetMetadata().GetName(), id: st.GetManifestId(), counter: counter, volumes: st.GetVolumes()})
		var size, written int64
		for _, v := range st.GetVolumes() {
			size += v.GetSizeBytes()
			written += v.GetBytesWritten()
			t.Logf("figures: backup %d (%s) volume %s (%s): size %d, read %d, written %d bytes, incremental %v, chunks %d of %d uploaded",
				i+1, b.GetMetadata().GetName(), v.GetName(), v.GetClassKind(), v.GetSizeBytes(), v.GetBytesRead(), v.GetBytesWritten(),
				v.GetIncremental(), v.GetChunksUploaded(), v.GetChunksTotal())
		}
		t.Logf("figures: backup %d took %s: %d bytes written for %d bytes of volumes (%.2f%%), base %q", i+1,
			time.Since(before).Round(time.Millisecond), written, size, 100*float64(written)/float64(size), st.GetBaseBackup())
		if len(st.GetVolumes()) != 2 {
			t.Fatalf("backup %d volumes: %v", i+1, st.GetVolumes())
		}
		for _, v := range st.GetVolumes() {
			if i > 0 && (!v.GetIncremental() || v.GetBytesWritten() > v.GetSizeBytes()/10) {
				t.Errorf("backup %d volume %s: incremental %v, %d bytes written of %d: want incremental, far below the size",
					i+1, v.GetName(), v.GetIncremental(), v.GetBytesWritten(), v.GetSizeBytes())
			}
		}
		if i < 2 {
			old := a.vmi("db").GetMetadata().GetUid()
			if _, err := a.api.VMs.Restart(a.ctx, &apiv1.RestartVirtualMachineRequest{Key: a.key("db")}); err != nil {
				t.Fatal(err)
			}
			_, _, _, wrote = a.bootAnywhere("db", old)
		}
	}

	// Retention: the first backup is gone, with its manifest.
	want := []string{taken[2].id, taken[1].id}
	testutil.Eventually(t, stateTimeout, "exactly the last two backups in the bucket", func() bool {
		return slices.Equal(a.manifests("s3"), want)
	})
	if out := a.cli("backup", "list", "--target", "s3"); !strings.Contains(out, taken[1].id) || !strings.Contains(out, "cluster-a") {
		t.Fatalf("backup list --target s3 lacks backup 2 or its cluster:\n%s", out)
	} else {
		t.Logf("backup list --target s3:\n%s", out)
	}

	// The node that holds db's local volume goes for good.
	a.setRunning("db", false)
	gone := a.nodeNamed(a.vm("db").GetStatus().GetNodeName())
	survivor := a.otherNode(gone)
	if err := a.PowerOff(gone.Node); err != nil {
		t.Fatal(err)
	}
	if _, err := a.api.Nodes.Delete(a.ctx, &apiv1.DeleteNodeRequest{Name: gone.Name}); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s (db's local volume) powered off and deleted; %s remains", gone.Name, survivor.Name)

	// The second backup, restored onto the survivor.
	began := time.Now()
	r := a.restoreBackup("restore-2", "s3", taken[1].id, "db-2")
	if r.GetStatus().GetPhase() != apiv1.BackupSucceeded || r.GetStatus().GetNodeName() != survivor.Name {
		t.Fatalf("restore of backup 2: %v", r.GetStatus())
	}
	t.Logf("figures: restore of backup 2 onto %s took %s", survivor.Name, time.Since(began).Round(time.Millisecond))
	restoredUID := a.vm("db-2").GetMetadata().GetUid()
	if got := imageSHA256(t, pool, ceph.VolumeImage(restoredUID, "data")); got != rbdSum {
		t.Errorf("restored rbd volume sha256 %s, want the backed up %s", got, rbdSum)
	}
	a.setRunning("db-2", true)
	_, n, prev, wrote := a.bootAnywhere("db-2", "")
	if n != survivor || prev != testguest.PersistLinePrefix+taken[1].counter {
		t.Fatalf("restored VM on %s found %q, wrote %q: want %s and the counter of backup 2 (%s)", n.Name, prev, wrote, survivor.Name, taken[1].counter)
	}
	t.Logf("db-2 restored from backup 2 booted on %s with counter %s (then wrote %s)", n.Name, taken[1].counter, wrote)

	// A second cluster, the same bucket: it lists what the first wrote
	// and restores it (its rbd class of the same name on a pool of its
	// own: one virtplane cluster per pool).
	b := newMultiNodeCluster(t, mnOptions{nodes: 1, ceph: true, serverArgs: []string{"--cluster-name", "cluster-b"}})
	b.rbdClassOwnPool("ceph")
	bucket.target(b, "s3", "shared")
	if got := b.manifests("s3"); !slices.Equal(got, want) {
		t.Fatalf("cluster b lists %v in the bucket, want %v", got, want)
	}
	out := b.cli("backup", "restore", taken[2].id, "--target", "s3", "--to", "db", "--wait")
	t.Logf("cluster b: backup restore --wait:\n%s", out)
	b.setRunning("db", true)
	if _, _, prev, _ := b.bootAnywhere("db", ""); prev != testguest.PersistLinePrefix+taken[2].counter {
		t.Fatalf("cluster b's db found %q, want the counter of backup 3 (%s)", prev, taken[2].counter)
	}

	// Corruption: a chunk of the local volume truncated, then one of the
	// rbd volume altered; each restore fails naming the object, and
	// leaves no VM, no file and no image.
	m := readManifest(t, a, "s3", taken[2].id)
	for _, tc := range []struct {
		name, volume string
		spoil        func(data []byte) []byte
	}{
		{"truncated", "local", func(d []byte) []byte { return d[:len(d)/2] }},
		{"altered", "data", func(d []byte) []byte { d = slices.Clone(d); d[len(d)/2] ^= 0xff; return d }},
	} {
		key := firstChunkKey(t, m, tc.volume)
		obj := "shared/" + key
		orig := bucket.get(t, a.ctx, obj)
		bucket.put(t, a.ctx, obj, tc.spoil(orig))
		r := a.restoreBackup("restore-"+tc.name, "s3", taken[2].id, "db-"+tc.name)
		if st := r.GetStatus(); st.GetPhase() != apiv1.BackupFailed || !strings.Contains(st.GetError(), "corrupt") || !strings.Contains(st.GetError(), key) {
			t.Fatalf("restore from a %s object: %v, want Failed naming %s as corrupt", tc.name, st, key)
		}
		t.Logf("restore from a %s chunk of volume %s failed: %s", tc.name, tc.volume, r.GetStatus().GetError())
		uid := r.GetStatus().GetVmUid()
		testutil.Eventually(t, rbdTimeout, "nothing left of db-"+tc.name, func() bool {
			if _, err := a.api.VMs.Get(a.ctx, &apiv1.GetVirtualMachineRequest{Key: a.key("db-" + tc.name)}); err == nil {
				return false
			}
			dir, _ := nodedir.Layout{Root: survivor.NodeDir}.VMDir(uid)
			if _, err := os.Stat(dir); err == nil {
				return false
			}
			return len(rbdImages(t, pool, uid))+len(rbdImages(t, pool, "backup-restore-"+r.GetMetadata().GetUid())) == 0
		})
		bucket.put(t, a.ctx, obj, orig)
	}
}

// readManifest reads backup id from target as a test sees the bucket.
func readManifest(t *testing.T, c *mnCluster, name, id string) *repo.Manifest {
	t.Helper()
	tgt, err := c.api.BackupTargets.Connect(c.ctx, &apiv1.ConnectBackupTargetRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	st, err := target.Store(c.ctx, tgt.GetBackupTarget())
	if err != nil {
		t.Fatal(err)
	}
	m, err := repo.New(st, repo.Options{}).GetManifest(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// firstChunkKey is the object key of volume's first stored chunk.
func firstChunkKey(t *testing.T, m *repo.Manifest, volume string) string {
	t.Helper()
	for _, v := range m.Volumes {
		if v.Name != volume {
			continue
		}
		for _, c := range v.Chunks {
			if c != "" {
				return "chunks/" + c[:2] + "/" + c
			}
		}
	}
	t.Fatalf("volume %s of backup %s has no stored chunk", volume, m.ID)
	return ""
}

func (b *s3Bucket) get(t *testing.T, ctx context.Context, key string) []byte {
	t.Helper()
	o, err := b.client.GetObject(ctx, b.name, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	data, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (b *s3Bucket) put(t *testing.T, ctx context.Context, key string, data []byte) {
	t.Helper()
	if _, err := b.client.PutObject(ctx, b.name, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}
