package ceph_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// The radosgw answers S3 over HTTPS from the host's namespace, with a
// certificate only its CA vouches for; a user's keys work for buckets and
// objects and appear on no command line. Its cost is logged.
func TestRGW(t *testing.T) {
	c, _ := sharedCeph.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	g, err := c.RGW(ctx, ceph.RGWOptions{}, t)
	if err != nil {
		t.Fatal(err)
	}
	rss, err := g.RSSBytes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("radosgw: up in %s (with its pools), %d MiB resident, %d threads", g.Started.Round(time.Millisecond), rss>>20, procfs.Threads(g.Pid()))
	if again, err := c.RGW(ctx, ceph.RGWOptions{}, t); err != nil || again != g {
		t.Errorf("a second RGW call: %v, %v; want the same radosgw", again, err)
	}
	if _, err := c.RGW(ctx, ceph.RGWOptions{HTTP: true}, t); err == nil {
		t.Error("an RGW call with other options: no error")
	}
	if !strings.HasPrefix(g.Endpoint, "https://"+strings.Split(c.Monitors()[0], ":")[0]+":") {
		t.Errorf("endpoint %s: want https on the cluster's address", g.Endpoint)
	}
	// Without the CA the certificate is not trusted.
	if _, err := http.Get(g.Endpoint + "/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET without the CA: %v, want a certificate error", err)
	}

	u, err := g.CreateUser(ctx, "rgwtest")
	if err != nil {
		t.Fatal(err)
	}
	if len(u.AccessKey) < 16 || len(u.SecretKey) < 32 {
		t.Errorf("keys of %d and %d bytes", len(u.AccessKey), len(u.SecretKey))
	}
	for _, pid := range ceph.PidsUsing(c.Conf()) {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Contains(cmd, []byte(u.SecretKey)) {
			t.Errorf("process %d has the secret key on its command line", pid)
		}
	}
	mc, err := minio.New(strings.TrimPrefix(g.Endpoint, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(u.AccessKey, u.SecretKey, ""), Secure: true, Transport: g.HTTPClient().Transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "rgwtest", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("virtplane"), 1<<20)
	if _, err := mc.PutObject(ctx, "rgwtest", "a/b", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, err := mc.GetObject(ctx, "rgwtest", "a/b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("object read back: %d bytes, %v", len(got), err)
	}
	bad, _ := minio.New(strings.TrimPrefix(g.Endpoint, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(u.AccessKey, "x"+u.SecretKey[1:], ""), Secure: true, Transport: g.HTTPClient().Transport,
	})
	if _, err := bad.BucketExists(ctx, "rgwtest"); err == nil {
		t.Error("a wrong secret key was accepted")
	}
	if _, err := g.CreateUser(ctx, "-bad"); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("a user name that is an option: %v", err)
	}
}

// BenchmarkRGW is what TLS costs the radosgw: 4 MiB objects PUT and GET
// from the host's namespace over HTTPS and over plain HTTP, each on a
// cluster of its own (one radosgw per cluster), side by side in one run:
//
//	go test -run - -bench RGW -benchtime 64x ./internal/testutil/ceph/
func BenchmarkRGW(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	for _, opts := range []ceph.RGWOptions{{}, {HTTP: true}} {
		name := map[bool]string{false: "https", true: "http"}[opts.HTTP]
		b.Run(name, func(b *testing.B) {
			ceph.Require(b)
			ctx := b.Context()
			run, err := multinode.Launch(ctx, 0, multinode.Options{NamePrefix: "rgwb", HostLink: true}, b)
			if err != nil {
				b.Fatal(err)
			}
			defer run.Close(b, false)
			c, err := ceph.StartInHub(ctx, run.Hub(), b)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			g, err := c.RGW(ctx, opts, b)
			if err != nil {
				b.Fatal(err)
			}
			u, err := g.CreateUser(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			host := strings.TrimPrefix(strings.TrimPrefix(g.Endpoint, "https://"), "http://")
			mc, err := minio.New(host, &minio.Options{Creds: credentials.NewStaticV4(u.AccessKey, u.SecretKey, ""),
				Secure: !opts.HTTP, Transport: g.HTTPClient().Transport})
			if err != nil {
				b.Fatal(err)
			}
			if err := mc.MakeBucket(ctx, "bench", minio.MakeBucketOptions{}); err != nil {
				b.Fatal(err)
			}
			cpu0, _ := procfs.CPUSeconds(g.Pid())
			b.SetBytes(2 * int64(len(data)))
			b.ResetTimer()
			for i := range b.N {
				key := strconv.Itoa(i)
				if _, err := mc.PutObject(ctx, "bench", key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
					b.Fatal(err)
				}
				o, err := mc.GetObject(ctx, "bench", key, minio.GetObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, o); err != nil {
					b.Fatal(err)
				}
				o.Close()
			}
			b.StopTimer()
			cpu1, _ := procfs.CPUSeconds(g.Pid())
			rss, _ := g.RSSBytes()
			b.ReportMetric((cpu1-cpu0)/float64(b.N), "rgw-cpu-s/op")
			b.ReportMetric(float64(rss>>20), "rgw-rss-MiB")
			b.ReportMetric(g.Started.Seconds(), "rgw-start-s")
		})
	}
}
