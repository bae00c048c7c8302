package repo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The S3 store on a real radosgw (HTTPS, a test CA): what Store
// promises, then the integration test of the repository.
func TestRepoOnS3(t *testing.T) {
	cfg, _ := s3Target(t)
	s, err := OpenS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("store", func(t *testing.T) { testStore(t, s) })
	t.Run("repo", func(t *testing.T) { exerciseRepo(t, s) })
}

// Two repositories under two prefixes of one bucket do not see each
// other's objects.
func TestS3Prefixes(t *testing.T) {
	ctx := t.Context()
	cfg, _ := s3Target(t)
	a, err := OpenS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prefix = "other/deeper/"
	b, err := OpenS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "k", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another prefix's object: %v, want ErrNotFound", err)
	}
	n := 0
	_ = b.List(ctx, "", func(ObjectInfo) error { n++; return nil })
	if n != 0 {
		t.Errorf("the other prefix lists %d objects", n)
	}
}

// OpenS3 refuses what cannot work, with errors that name the problem and
// never the secret key.
func TestOpenS3Refuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg, _ := s3Target(t)
	for name, c := range map[string]struct {
		mutate func(*S3Config)
		want   string
	}{
		"wrong secret":         {func(c *S3Config) { c.SecretKey = "wrong" + c.SecretKey[5:] }, "signature we calculated does not match"},
		"missing bucket":       {func(c *S3Config) { c.Bucket = "nope-" + c.Bucket }, "not found"},
		"untrusted CA":         {func(c *S3Config) { c.CACertPEM = nil }, "certificate"},
		"http with a CA":       {func(c *S3Config) { c.Endpoint = strings.Replace(c.Endpoint, "https", "http", 1) }, "CA certificate is for an https"},
		"a path in the URL":    {func(c *S3Config) { c.Endpoint += "/x" }, "scheme://host[:port] alone"},
		"ftp":                  {func(c *S3Config) { c.Endpoint = "ftp://x" }, "https or http"},
		"prefix without slash": {func(c *S3Config) { c.Prefix = "a" }, "s3 prefix"},
		"prefix up":            {func(c *S3Config) { c.Prefix = "../" }, "s3 prefix"},
		"bucket name bad":      {func(c *S3Config) { c.Bucket = "A_B" }, "s3 bucket"},
		"no keys":              {func(c *S3Config) { c.AccessKey = "" }, "access key and a secret key are required"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := cfg
			c.mutate(&bad)
			_, err := OpenS3(ctx, bad)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
			if err != nil && (strings.Contains(err.Error(), cfg.SecretKey) || strings.Contains(err.Error(), bad.SecretKey)) {
				t.Errorf("the error holds the secret key: %v", err)
			}
		})
	}
}
