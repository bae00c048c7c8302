package repo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// S3Config is how to reach an S3 bucket.
type S3Config struct {
	// Endpoint is the server's URL: https://host[:port] or http://...
	// (no path).
	Endpoint string
	// Bucket (it must exist) and Prefix (a key prefix ending in "/", or
	// ""): the repository is the objects under Prefix.
	Bucket string
	Prefix string
	// Region (optional: "" lets the client find it).
	Region string
	// AccessKey and SecretKey authenticate; neither is ever logged or
	// put in an error.
	AccessKey string
	SecretKey string
	// CACertPEM are the CAs to trust for an https endpoint instead of
	// the system's (optional).
	CACertPEM []byte
}

// s3Store is a Store in a bucket, under a prefix.
type s3Store struct {
	core   minio.Core
	bucket string
	prefix string
}

// OpenS3 is a Store in an S3 bucket (github.com/minio/minio-go/v7). It
// checks that the bucket exists and that the keys may read it.
func OpenS3(ctx context.Context, cfg S3Config) (Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	switch {
	case err != nil:
		return nil, fmt.Errorf("s3 endpoint: %w", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("s3 endpoint %q: the scheme must be https or http", clip(cfg.Endpoint))
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("s3 endpoint %q: must be scheme://host[:port] alone", clip(cfg.Endpoint))
	}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("s3 bucket %q: %w", clip(cfg.Bucket), err)
	}
	if cfg.Prefix != "" {
		if err := validatePrefix(cfg.Prefix); err != nil || !strings.HasSuffix(cfg.Prefix, "/") {
			return nil, fmt.Errorf("s3 prefix %q: a key prefix of [a-z0-9._/-] that ends in \"/\"", clip(cfg.Prefix))
		}
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("s3: an access key and a secret key are required")
	}
	secure := u.Scheme == "https"
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if len(cfg.CACertPEM) > 0 {
		if !secure {
			return nil, errors.New("s3: a CA certificate is for an https endpoint")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CACertPEM) {
			return nil, errors.New("s3: the CA certificate is not PEM")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    secure,
		Transport: tr,
		Region:    cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("s3 bucket %s at %s: %w", cfg.Bucket, u.Host, err)
	}
	if !ok {
		return nil, fmt.Errorf("s3 bucket %s at %s: %w", cfg.Bucket, u.Host, ErrNotFound)
	}
	return &s3Store{core: minio.Core{Client: client}, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// s3Error maps a missing object to ErrNotFound.
func s3Error(op, key string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, "NotFound":
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	// A known size is one PUT below the part size (minio-go's 16 MiB at
	// least); above, a multipart upload, visible only once completed.
	_, err := s.core.Client.PutObject(ctx, s.bucket, s.prefix+key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return s3Error("put", key, err)
	}
	return nil
}

func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	// Core.GetObject sends the request now, so a missing object is an
	// error here rather than at the first Read.
	rc, _, _, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	return rc, nil
}

func (s *s3Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	oi, err := s.core.Client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s3Error("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

func (s *s3Store) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing's goroutine when fn fails
	for oi := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("list %q: %w", prefix, oi.Err)
		}
		key, ok := strings.CutPrefix(oi.Key, s.prefix)
		if !ok || ValidateKey(key) != nil {
			continue // not one of the repository's: never handed on
		}
		if err := fn(ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.core.Client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		if errors.Is(s3Error("delete", key, err), ErrNotFound) {
			return nil
		}
		return s3Error("delete", key, err)
	}
	return nil
}
