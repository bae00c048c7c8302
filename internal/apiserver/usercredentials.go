package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// credentialService serves Credentials: bearer tokens and client
// certificates of users and service accounts. A token's secret is shown
// once, by IssueToken, and only its SHA-256 is stored; a certificate's
// key never leaves its holder. Reads never carry the hash.
type credentialService struct {
	apiv1.UnimplementedCredentialsServer
	objects[*apiv1.Credential, *apiv1.ListCredentialsResponse, noEvent]
	s *Server
}

func newCredentialService(s *Server) apiv1.CredentialsServer {
	return &credentialService{s: s, objects: objects[*apiv1.Credential, *apiv1.ListCredentialsResponse, noEvent]{
		st: s.stores.Credentials, log: s.log, kind: apiv1.KindCredential, noun: "credential", attr: "credential",
		listResponse: func(p store.Page[*apiv1.Credential]) *apiv1.ListCredentialsResponse {
			return &apiv1.ListCredentialsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
	}}
}

func (c *credentialService) ready() error {
	if c.st == nil || c.s.stores.Users == nil || c.s.stores.ServiceAccounts == nil {
		return errNoIdentities
	}
	return nil
}

// withoutHash is cr as reads show it: without the token's hash, which
// would let anyone who reads it guess offline.
func withoutHash(cr *apiv1.Credential) *apiv1.Credential {
	if len(cr.GetSpec().GetTokenSha256()) == 0 {
		return cr
	}
	out := proto.Clone(cr).(*apiv1.Credential)
	out.Spec.TokenSha256 = nil
	return out
}

// newCredential checks an issue request and makes its record: a fresh
// name, the subject (which must exist), expiry and issuer.
func (c *credentialService) newCredential(ctx context.Context, sub *apiv1.Subject, ttlSeconds int64, description, typ string) (*apiv1.Credential, time.Duration, error) {
	ttl, errs := validation.ValidateIssue(sub, ttlSeconds, description)
	if len(errs) > 0 {
		return nil, 0, validation.ToStatusError(apiv1.KindCredential, "", errs)
	}
	var err error
	if sub.GetKind() == apiv1.SubjectUser {
		_, err = c.s.stores.Users.Get(ctx, "", sub.GetName())
	} else {
		_, err = c.s.stores.ServiceAccounts.Get(ctx, sub.GetNamespace(), sub.GetName())
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, 0, status.Errorf(codes.FailedPrecondition, "subject: %s does not exist: create it first", subjectKey(sub))
	case err != nil:
		return nil, 0, toStatus(err)
	}
	if err := c.s.noEscalation(ctx, sub); err != nil {
		return nil, 0, err
	}
	now := c.s.opts.Clock()
	return &apiv1.Credential{
		Metadata: &apiv1.ObjectMeta{Name: newCredentialName()},
		Spec: &apiv1.CredentialSpec{
			Subject: &apiv1.Subject{Kind: sub.GetKind(), Name: sub.GetName(), Namespace: sub.GetNamespace()},
			Type:    typ, Expires: timestamppb.New(now.Add(ttl)), Description: description,
		},
		Status: &apiv1.CredentialStatus{IssuedBy: IdentityFrom(ctx).String()},
	}, ttl, nil
}

// IssueToken makes a bearer token "vpt_<credential name>.<secret>" for
// the subject. The secret is 256 random bits; only its SHA-256 is kept.
func (c *credentialService) IssueToken(ctx context.Context, req *apiv1.IssueTokenRequest) (*apiv1.IssueTokenResponse, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	cr, _, err := c.newCredential(ctx, req.GetSubject(), req.GetTtlSeconds(), req.GetDescription(), apiv1.CredentialToken)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := base64.RawURLEncoding.EncodeToString(raw)
	cr.Spec.TokenSha256 = tokenSHA256(secret)
	out, err := c.create(ctx, cr, "subject", subjectKey(cr.Spec.Subject), "type", cr.Spec.Type, "expires", cr.Spec.Expires.AsTime(), "by", cr.Status.IssuedBy)
	if err != nil {
		return nil, err
	}
	return &apiv1.IssueTokenResponse{Token: apiv1.TokenPrefix + out.GetMetadata().GetName() + "." + secret, Credential: withoutHash(out)}, nil
}

// IssueCertificate signs the request's public key into a client
// certificate for the subject, with the agent CA.
func (c *credentialService) IssueCertificate(ctx context.Context, req *apiv1.IssueCertificateRequest) (*apiv1.IssueCertificateResponse, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	ca := c.s.opts.CA
	if ca == nil {
		return nil, status.Error(codes.FailedPrecondition, "this server signs no certificates (it has no CA)")
	}
	cr, ttl, err := c.newCredential(ctx, req.GetSubject(), req.GetTtlSeconds(), req.GetDescription(), apiv1.CredentialCertificate)
	if err != nil {
		return nil, err
	}
	sub := cr.Spec.Subject
	kind := pki.UserCertUser
	if sub.GetKind() == apiv1.SubjectServiceAccount {
		kind = pki.UserCertServiceAccount
	}
	cert, certPEM, err := ca.SignUserCSR(req.GetCsrPem(), pki.UserCommonName(kind, sub.GetNamespace(), sub.GetName()), c.s.opts.Clock(), ttl)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "csr_pem: %v", err)
	}
	cr.Spec.CertificateSerial = pki.SerialHex(cert)
	cr.Spec.Expires = timestamppb.New(cert.NotAfter)
	out, err := c.create(ctx, cr, "subject", subjectKey(sub), "type", cr.Spec.Type, "serial", cr.Spec.CertificateSerial, "expires", cert.NotAfter, "by", cr.Status.IssuedBy)
	if err != nil {
		return nil, err
	}
	return &apiv1.IssueCertificateResponse{CertificatePem: certPEM, CaPem: ca.PEM, Credential: out}, nil
}

func (c *credentialService) Get(ctx context.Context, req *apiv1.GetCredentialRequest) (*apiv1.Credential, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	out, err := getNamed(ctx, c.st, apiv1.KindCredential, req.GetName())
	if err != nil {
		return nil, err
	}
	return withoutHash(out), nil
}

// List lists credentials, only the subject's when the request names one
// (then authorization allowed a service account's namespace admins).
func (c *credentialService) List(ctx context.Context, req *apiv1.ListCredentialsRequest) (*apiv1.ListCredentialsResponse, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	out, err := c.list(ctx, clusterList(req.GetOptions()))
	if err != nil {
		return nil, err
	}
	items := out.Items[:0]
	for _, cr := range out.Items {
		if sub := req.GetSubject(); sub != nil && subjectKey(cr.GetSpec().GetSubject()) != subjectKey(sub) {
			continue
		}
		items = append(items, withoutHash(cr))
	}
	out.Items = items
	return out, nil
}

// Revoke marks the credential revoked: every server refuses it from its
// next watch event on and ends its open calls (usercreds.go).
func (c *credentialService) Revoke(ctx context.Context, req *apiv1.RevokeCredentialRequest) (*apiv1.Credential, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := checkClusterName(apiv1.KindCredential, req.GetName()); err != nil {
		return nil, err
	}
	out, err := c.s.revokeCredential(ctx, req.GetName(), IdentityFrom(ctx).String())
	if err != nil {
		return nil, err
	}
	return withoutHash(out), nil
}

// revokeCredential sets spec.revoked on credential name, once.
func (s *Server) revokeCredential(ctx context.Context, name, by string) (*apiv1.Credential, error) {
	now := timestamppb.New(s.opts.Clock())
	out, err := s.stores.Credentials.GuaranteedUpdate(ctx, "", name, func(cr *apiv1.Credential) (*apiv1.Credential, error) {
		if cr.GetSpec().GetRevoked() {
			return cr, nil
		}
		if cr.Spec == nil {
			cr.Spec = &apiv1.CredentialSpec{}
		}
		if cr.Status == nil {
			cr.Status = &apiv1.CredentialStatus{}
		}
		cr.Spec.Revoked, cr.Status.RevokedAt, cr.Status.RevokedBy = true, now, by
		return cr, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	s.log.Info("credential revoked", "credential", name, "subject", subjectKey(out.GetSpec().GetSubject()), "by", by)
	return out, nil
}

func (c *credentialService) Delete(ctx context.Context, req *apiv1.DeleteCredentialRequest) (*apiv1.Credential, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	out, err := deleteNamed(ctx, c.st, apiv1.KindCredential, req.GetName(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	c.log.Info("credential deleted", "credential", req.GetName(), "by", IdentityFrom(ctx).String())
	return withoutHash(out), nil
}
