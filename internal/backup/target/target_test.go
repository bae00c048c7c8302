package target

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

var sharedCeph cephtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	if err := sharedCeph.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared Ceph cluster:", err)
		code = 1
	}
	os.Exit(code)
}

// probe opens t's store and probes it, as the server's target controller
// does, and returns the Ready condition it would write.
func probe(ctx context.Context, t *apiv1.BackupTarget) *apiv1.Condition {
	ctx, cancel := context.WithTimeout(ctx, 2*OpenTimeout)
	defer cancel()
	st, err := Store(ctx, t)
	if err == nil {
		err = Probe(ctx, st)
	}
	return Condition(t, err, time.Now())
}

// A target's Ready condition names what is wrong with it, on a real
// radosgw (HTTPS with a CA of its own) and a real directory: a wrong key,
// a missing bucket, an endpoint that does not answer, a missing
// directory; the secret key is in no message.
func TestProbeWordsEachFailure(t *testing.T) {
	ctx := t.Context()
	cl, _ := sharedCeph.Get(t)
	rgw, err := cl.RGW(ctx, cephtest.RGWOptions{}, t)
	if err != nil {
		t.Fatal(err)
	}
	user, err := rgw.CreateUser(ctx, "target-probe")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(strings.TrimPrefix(rgw.Endpoint, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(user.AccessKey, user.SecretKey, ""), Secure: true, Transport: rgw.HTTPClient().Transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "probes", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	s3 := func(mutate func(*apiv1.S3BackupTarget)) *apiv1.BackupTarget {
		s := &apiv1.S3BackupTarget{Endpoint: rgw.Endpoint, Bucket: "probes", Prefix: "a/b",
			AccessKey: user.AccessKey, SecretKey: user.SecretKey, CaCert: string(rgw.CACertPEM)}
		if mutate != nil {
			mutate(s)
		}
		return &apiv1.BackupTarget{Metadata: &apiv1.ObjectMeta{Name: "t"}, Spec: &apiv1.BackupTargetSpec{S3: s}}
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		target *apiv1.BackupTarget
		reason string
		field  string
	}{
		{"good s3", s3(nil), ReasonReachable, ""},
		{"wrong secret key", s3(func(s *apiv1.S3BackupTarget) { s.SecretKey = "wrong" + s.SecretKey[5:] }), ReasonKeyRefused, "spec.s3.secret_key"},
		{"unknown access key", s3(func(s *apiv1.S3BackupTarget) { s.AccessKey = "NOSUCHKEY" }), ReasonKeyRefused, "spec.s3.access_key"},
		{"missing bucket", s3(func(s *apiv1.S3BackupTarget) { s.Bucket = "nope" }), ReasonNoBucket, "spec.s3.bucket"},
		{"endpoint that does not answer", s3(func(s *apiv1.S3BackupTarget) { s.Endpoint = "https://127.0.0.1:9" }), ReasonUnreachable, "spec.s3.endpoint"},
		{"good directory", &apiv1.BackupTarget{Spec: &apiv1.BackupTargetSpec{Directory: &apiv1.DirectoryBackupTarget{Path: dir}}}, ReasonReachable, ""},
		{"missing directory", &apiv1.BackupTarget{Spec: &apiv1.BackupTargetSpec{Directory: &apiv1.DirectoryBackupTarget{Path: filepath.Join(dir, "nope")}}}, ReasonNoDirectory, "spec.directory.path"},
	} {
		c := probe(ctx, tc.target)
		t.Logf("%s: %s %s: %s", tc.name, c.GetStatus(), c.GetReason(), c.GetMessage())
		if c.GetReason() != tc.reason || !strings.Contains(c.GetMessage(), tc.field) {
			t.Errorf("%s: %s %q, want reason %s naming %s", tc.name, c.GetReason(), c.GetMessage(), tc.reason, tc.field)
		}
		if strings.Contains(c.GetMessage(), user.SecretKey) || strings.Contains(c.GetMessage(), user.SecretKey[5:]) {
			t.Errorf("%s: the message holds the secret key", tc.name)
		}
	}
	// The probe object is gone: nothing but what backups write stays.
	for o := range mc.ListObjects(ctx, "probes", minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("object %s left in the bucket", o.Key)
	}
}
