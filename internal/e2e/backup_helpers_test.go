package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// backupTimeout bounds a backup or a restore of the tests' volumes (a
// snapshot, then tens of MiB through radosgw on a loaded host).
const backupTimeout = 4 * time.Minute

// s3Bucket is a bucket of a test's own on the shared cluster's radosgw,
// with the keys of a user of its own, and a client the test reads and
// alters the objects with.
type s3Bucket struct {
	rgw    *cephtest.RGW
	user   cephtest.S3User
	name   string
	client *minio.Client
}

// newS3Bucket starts (once for the package) the shared cluster's
// radosgw, makes an S3 user and a bucket for the test.
func newS3Bucket(t *testing.T, ctx context.Context, id string) *s3Bucket {
	t.Helper()
	cl, _ := sharedCeph.Get(t)
	rgw, err := cl.RGW(ctx, cephtest.RGWOptions{}, t)
	if err != nil {
		t.Fatal(err)
	}
	user, err := rgw.CreateUser(ctx, "e2e-"+id)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rgw.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(user.AccessKey, user.SecretKey, ""), Secure: u.Scheme == "https",
		Transport: rgw.HTTPClient().Transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &s3Bucket{rgw: rgw, user: user, name: strings.ReplaceAll("bk-"+id, "_", "-"), client: mc}
	if err := mc.MakeBucket(ctx, b.name, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("radosgw at %s (started in %s), bucket %s", rgw.Endpoint, rgw.Started.Round(time.Millisecond), b.name)
	return b
}

// target makes BackupTarget name of c on the bucket under prefix and
// waits until the server's probe finds it ready.
func (b *s3Bucket) target(c *mnCluster, name, prefix string) {
	c.t.Helper()
	if _, err := c.api.BackupTargets.Create(c.ctx, &apiv1.CreateBackupTargetRequest{BackupTarget: &apiv1.BackupTarget{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.BackupTargetSpec{S3: &apiv1.S3BackupTarget{
			Endpoint: b.rgw.Endpoint, Bucket: b.name, Prefix: prefix,
			AccessKey: b.user.AccessKey, SecretKey: b.user.SecretKey, CaCert: string(b.rgw.CACertPEM),
		}},
	}}); err != nil {
		c.t.Fatal(err)
	}
	testutil.Eventually(c.t, stateTimeout, "backup target "+name+" ready", func() bool {
		got, err := c.api.BackupTargets.Get(c.ctx, &apiv1.GetBackupTargetRequest{Name: name})
		return err == nil && apiv1.IsConditionTrue(got.GetStatus().GetConditions(), apiv1.ConditionReady)
	})
}

// manifests lists the ids of the backups target holds, as the server
// reads them.
func (c *mnCluster) manifests(target string) []string {
	c.t.Helper()
	resp, err := c.api.BackupTargets.ListManifests(c.ctx, &apiv1.ListBackupManifestsRequest{Name: target})
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, m := range resp.GetItems() {
		ids = append(ids, m.GetId())
	}
	return ids
}

// waitBackupRestore waits until backup restore name ended and returns it.
func (c *mnCluster) waitBackupRestore(name string) *apiv1.VirtualMachineBackupRestore {
	c.t.Helper()
	var r *apiv1.VirtualMachineBackupRestore
	testutil.Eventually(c.t, backupTimeout, "backup restore "+name+" final", func() bool {
		var err error
		if r, err = c.api.BackupRestores.Get(c.ctx, &apiv1.GetBackupRestoreRequest{Key: c.key(name)}); err != nil {
			c.t.Fatal(err)
		}
		return apiv1.BackupFinal(r.GetStatus().GetPhase())
	})
	return r
}

// restoreBackup restores backup id of target into a new VM vm (no node
// named: the controller picks one) and returns the ended restore.
func (c *mnCluster) restoreBackup(name, target, id, vm string) *apiv1.VirtualMachineBackupRestore {
	c.t.Helper()
	if _, err := c.api.BackupRestores.Create(c.ctx, &apiv1.CreateBackupRestoreRequest{BackupRestore: &apiv1.VirtualMachineBackupRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:     &apiv1.VirtualMachineBackupRestoreSpec{Target: target, BackupId: id, VmName: vm, NewIdentity: true},
	}}); err != nil {
		c.t.Fatal(err)
	}
	return c.waitBackupRestore(name)
}

// imageSHA256 is the sha256 of `rbd export` of pool/image[@snap].
func imageSHA256(t *testing.T, p rbdPool, spec string) string {
	t.Helper()
	dir := t.TempDir()
	dst := filepath.Join(dir, "export.raw")
	if _, err := p.cl.Admin(t.Context(), "rbd", "export", "--no-progress", p.name+"/"+spec, dst); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
