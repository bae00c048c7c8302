package repo

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// sharedCeph is the package's Ceph cluster, with its radosgw: the S3
// and RBD tests start it on first use; TestMain stops it.
var sharedCeph cephtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	if err := sharedCeph.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared Ceph cluster:", err)
		code = 1
	}
	os.Exit(code)
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// s3Target is an S3 bucket of its own on the shared cluster's radosgw,
// with a user of its own: its config (prefix "repo/") and the radosgw.
func s3Target(t *testing.T) (S3Config, *cephtest.RGW) {
	t.Helper()
	c, _ := sharedCeph.Get(t)
	ctx := t.Context()
	g, err := c.RGW(ctx, cephtest.RGWOptions{}, t)
	if err != nil {
		t.Fatal(err)
	}
	user, err := g.CreateUser(ctx, randomName("u"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := S3Config{
		Endpoint: g.Endpoint, Bucket: randomName("backups-"), Prefix: "repo/",
		AccessKey: user.AccessKey, SecretKey: user.SecretKey, CACertPEM: g.CACertPEM,
	}
	mc, err := minio.New(strings.TrimPrefix(g.Endpoint, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(user.AccessKey, user.SecretKey, ""), Secure: true, Transport: g.HTTPClient().Transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	return cfg, g
}

// rbdConn is a connection to the shared cluster's pool as the node agent
// makes one: a restricted user, its key in a 0600 file.
func rbdConn(t *testing.T) (*ceph.Conn, *cephtest.Cluster) {
	t.Helper()
	c, _ := sharedCeph.Get(t)
	user := randomName("bk")
	key, err := c.CreateUser(t.Context(), user, "mon", "profile rbd", "osd", "profile rbd pool="+c.Pool())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return &ceph.Conn{Monitors: c.Monitors(), Pool: c.Pool(), User: user, KeyFile: file}, c
}
