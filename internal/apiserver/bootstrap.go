package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Bootstrap tokens follow kubeadm's format: "<6>.<16>" of [a-z0-9]; the
// id names the stored object, the secret is kept only as a hash.
var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

const (
	// DefaultTokenTTL is a token's life when the request names none.
	DefaultTokenTTL = time.Hour
	// MaxTokenTTL: a bootstrap token is for one join, soon after it is
	// made; a longer-lived one is a standing credential.
	MaxTokenTTL = 24 * time.Hour
)

// errBadToken is the one answer to every wrong token, so that a caller
// learns nothing about which ids exist.
var errBadToken = status.Error(codes.Unauthenticated, "token: invalid, expired or already used bootstrap token")

type bootstrapService struct {
	apiv1.UnimplementedBootstrapServer
	s *Server
}

func newBootstrapService(s *Server) apiv1.BootstrapServer { return &bootstrapService{s: s} }

func (b *bootstrapService) ready() error {
	if b.s.opts.CA == nil || b.s.stores.BootstrapTokens == nil || b.s.stores.NodeCredentials == nil {
		return status.Error(codes.FailedPrecondition, "this server does not issue node certificates")
	}
	return nil
}

func (b *bootstrapService) CreateToken(ctx context.Context, req *apiv1.CreateBootstrapTokenRequest) (*apiv1.CreateBootstrapTokenResponse, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	ttl := time.Duration(req.GetTtlSeconds()) * time.Second
	switch {
	case req.GetTtlSeconds() == 0:
		ttl = DefaultTokenTTL
	case ttl < time.Minute || ttl > MaxTokenTTL:
		return nil, status.Errorf(codes.InvalidArgument, "ttl_seconds: Invalid value: %d: must be between 60 and %d", req.GetTtlSeconds(), int64(MaxTokenTTL.Seconds()))
	}
	if n := req.GetNodeName(); n != "" {
		if msgs := utilvalidation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			return nil, status.Errorf(codes.InvalidArgument, "node_name: Invalid value: %q: %s", n, msgs[0])
		}
	}
	if len(req.GetDescription()) > 256 {
		return nil, status.Error(codes.InvalidArgument, "description: Too long: must have at most 256 bytes")
	}
	b.sweep(ctx)
	id, secret := rand.Text()[:6], rand.Text()[:16]
	id, secret = lowerAlnum(id), lowerAlnum(secret)
	sum := sha256.Sum256([]byte(secret))
	expires := b.s.opts.Clock().Add(ttl)
	_, err := b.s.stores.BootstrapTokens.Create(ctx, &apiv1.BootstrapToken{
		Metadata: &apiv1.ObjectMeta{Name: id},
		Spec: &apiv1.BootstrapTokenSpec{
			SecretSha256: sum[:], Expires: timestamppb.New(expires),
			Description: req.GetDescription(), NodeName: req.GetNodeName(),
		},
	})
	if err != nil {
		return nil, toStatus(err)
	}
	b.s.log.Info("bootstrap token created", "id", id, "expires", expires, "node", req.GetNodeName())
	return &apiv1.CreateBootstrapTokenResponse{Token: id + "." + secret, Expires: timestamppb.New(expires), CaCertHash: b.s.opts.CA.Hash()}, nil
}

// lowerAlnum maps rand.Text's base32 alphabet (A–Z, 2–7) to the token
// alphabet: 5 bits of entropy per character either way.
func lowerAlnum(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c - 'A' + 'a'
		}
	}
	return string(out)
}

// sweep deletes expired tokens; best effort, on each new token.
func (b *bootstrapService) sweep(ctx context.Context) {
	items, _, err := b.s.stores.BootstrapTokens.List(ctx, store.ListOptions{})
	if err != nil {
		return
	}
	now := b.s.opts.Clock()
	for _, t := range items {
		if now.After(t.GetSpec().GetExpires().AsTime()) {
			_, _, _ = b.s.stores.BootstrapTokens.Delete(ctx, "", t.GetMetadata().GetName(), store.DeleteOptions{})
		}
	}
}

func (b *bootstrapService) Join(ctx context.Context, req *apiv1.JoinRequest) (*apiv1.JoinResponse, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	node := req.GetNodeName()
	if msgs := utilvalidation.IsDNS1123Subdomain(node); len(msgs) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "node_name: Invalid value: %q: %s", node, msgs[0])
	}
	m := tokenRE.FindStringSubmatch(req.GetToken())
	if m == nil {
		return nil, errBadToken
	}
	tok, err := b.s.stores.BootstrapTokens.Get(ctx, "", m[1])
	if errors.Is(err, store.ErrNotFound) {
		return nil, errBadToken
	}
	if err != nil {
		return nil, toStatus(err)
	}
	sum := sha256.Sum256([]byte(m[2]))
	now := b.s.opts.Clock()
	if subtle.ConstantTimeCompare(sum[:], tok.GetSpec().GetSecretSha256()) != 1 || now.After(tok.GetSpec().GetExpires().AsTime()) {
		return nil, errBadToken
	}
	if want := tok.GetSpec().GetNodeName(); want != "" && want != node {
		return nil, status.Errorf(codes.PermissionDenied, "node_name: this token is for node %q", want)
	}
	// A token for any name must not take over a node that has joined: its
	// holder would read that node's instances. Replacing a node's
	// credential takes a token made for that node.
	if cur, err := b.s.stores.NodeCredentials.Get(ctx, "", node); err == nil && tok.GetSpec().GetNodeName() == "" && valid(cur, now) {
		return nil, status.Errorf(codes.FailedPrecondition,
			"node_name: node %q has joined already; to replace its credential make a token with --node-name %s (or delete the node)", node, node)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, toStatus(err)
	}
	cert, certPEM, err := b.s.opts.CA.SignNodeCSR(req.GetCsrPem(), node, now, b.s.opts.NodeCertValidity)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "csr_pem: %v", err)
	}
	// Consume the token first, on the version read: of two joins with one
	// token only one gets past this.
	if _, _, err := b.s.stores.BootstrapTokens.Delete(ctx, "", tok.Metadata.Name,
		store.DeleteOptions{ResourceVersion: tok.Metadata.ResourceVersion}); err != nil {
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			return nil, errBadToken
		}
		return nil, toStatus(err)
	}
	if err := b.putCredential(ctx, node, cert, ""); err != nil {
		return nil, err
	}
	b.s.log.Info("node joined", "node", node, "serial", pki.SerialHex(cert), "token", tok.Metadata.Name, "not_after", cert.NotAfter)
	return &apiv1.JoinResponse{CertificatePem: certPEM, CaPem: b.s.opts.CA.PEM}, nil
}

func (b *bootstrapService) Renew(ctx context.Context, req *apiv1.RenewRequest) (*apiv1.JoinResponse, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	id := IdentityFrom(ctx)
	if id.Kind != Node || id.Serial == "" {
		return nil, status.Error(codes.FailedPrecondition, "only a node authenticated by its certificate renews it")
	}
	cert, certPEM, err := b.s.opts.CA.SignNodeCSR(req.GetCsrPem(), id.Node, b.s.opts.Clock(), b.s.opts.NodeCertValidity)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "csr_pem: %v", err)
	}
	if err := b.putCredential(ctx, id.Node, cert, id.Serial); err != nil {
		return nil, err
	}
	b.s.log.Info("node certificate renewed", "node", id.Node, "old_serial", id.Serial, "serial", pki.SerialHex(cert), "not_after", cert.NotAfter)
	return &apiv1.JoinResponse{CertificatePem: certPEM, CaPem: b.s.opts.CA.PEM}, nil
}

// putCredential lists cert as the node's. A join (keep empty) replaces
// every earlier certificate and creates the record if need be; a renewal
// keeps only the certificate renewing, keep (its open connections go on
// until it expires), besides the new one.
func (b *bootstrapService) putCredential(ctx context.Context, node string, cert *x509.Certificate, keep string) error {
	join := keep == ""
	entry := &apiv1.NodeCertificate{Serial: pki.SerialHex(cert), NotAfter: timestamppb.New(cert.NotAfter), Issued: timestamppb.New(b.s.opts.Clock())}
	_, err := b.s.stores.NodeCredentials.GuaranteedUpdate(ctx, "", node, func(cur *apiv1.NodeCredential) (*apiv1.NodeCredential, error) {
		if !join && !slices.ContainsFunc(cur.Certificates, func(c *apiv1.NodeCertificate) bool { return c.GetSerial() == keep }) {
			return nil, status.Errorf(codes.Unauthenticated, "node %s: certificate %s was revoked", node, keep)
		}
		cur.Certificates = slices.DeleteFunc(cur.Certificates, func(c *apiv1.NodeCertificate) bool { return c.GetSerial() != keep })
		cur.Certificates = append(cur.Certificates, entry)
		return cur, nil
	})
	if errors.Is(err, store.ErrNotFound) && join {
		_, err = b.s.stores.NodeCredentials.Create(ctx, &apiv1.NodeCredential{
			Metadata: &apiv1.ObjectMeta{Name: node}, Certificates: []*apiv1.NodeCertificate{entry},
		})
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.Unauthenticated, "node %s: its credential was revoked", node)
		}
		return toStatus(fmt.Errorf("recording node %s's certificate: %w", node, err))
	}
	return nil
}

// valid reports whether nc lists a certificate that has not expired.
func valid(nc *apiv1.NodeCredential, now time.Time) bool {
	return slices.ContainsFunc(nc.GetCertificates(), func(c *apiv1.NodeCertificate) bool {
		return now.Before(c.GetNotAfter().AsTime())
	})
}
