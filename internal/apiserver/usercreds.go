package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// userCreds is the API server's view of which credentials of users and
// service accounts are valid, as nodeCreds is of node certificates:
// watched caches of the Credential, User and ServiceAccount records, so
// that authenticating a call costs map lookups in the tap handle, and a
// revocation (spec.revoked set, the record deleted, its user disabled or
// deleted, its service account deleted) reaches every server through its
// watch and cancels the credential's open calls at once.
type userCreds struct {
	creds *informer.Informer[*apiv1.Credential]
	users *informer.Informer[*apiv1.User]
	sas   *informer.Informer[*apiv1.ServiceAccount]
	// userStored and saStored read a subject the caches do not hold
	// from the store: the three caches watch apart, so a credential
	// issued just after its user or service account was made may reach
	// its cache first.
	userStored func(name string) (*apiv1.User, bool)
	saStored   func(namespace, name string) bool
	// credStored and certStored read a credential the cache does not hold
	// yet (a token used the moment it was issued, maybe through another
	// server).
	credStored func(name string) (*apiv1.Credential, bool)
	certStored func(serial string) []*apiv1.Credential
	clock      func() time.Time

	mu    sync.Mutex
	calls map[string]map[*trackedCall]struct{} // credential name → open calls
}

const bySerial = "serial"

// credentialName is the name of every credential: newCredentialName's.
var credentialName = regexp.MustCompile(`^cred-[0-9a-f]{16}$`)

// newCredentialName is a fresh credential's name: "cred-" and 8 random
// bytes in hex, which is also the id part of its token.
func newCredentialName() string {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return "cred-" + hex.EncodeToString(id)
}

// subjectLookupTimeout bounds the store read of a subject the caches do
// not hold yet (userCreds.subjectStored).
const subjectLookupTimeout = 5 * time.Second

func newUserCreds(st Stores, clock func() time.Time, log *slog.Logger) *userCreds {
	c := &userCreds{clock: clock, calls: map[string]map[*trackedCall]struct{}{}}
	if st.Credentials == nil || st.Users == nil || st.ServiceAccounts == nil {
		return c
	}
	c.userStored = func(name string) (*apiv1.User, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), subjectLookupTimeout)
		defer cancel()
		u, err := st.Users.Get(ctx, "", name)
		return u, err == nil
	}
	c.credStored = func(name string) (*apiv1.Credential, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), subjectLookupTimeout)
		defer cancel()
		cr, err := st.Credentials.Get(ctx, "", name)
		return cr, err == nil
	}
	c.certStored = func(serial string) []*apiv1.Credential {
		ctx, cancel := context.WithTimeout(context.Background(), subjectLookupTimeout)
		defer cancel()
		all, _, err := st.Credentials.List(ctx, store.ListOptions{})
		if err != nil {
			return nil
		}
		return slices.DeleteFunc(all, func(cr *apiv1.Credential) bool { return cr.GetSpec().GetCertificateSerial() != serial })
	}
	c.saStored = func(namespace, name string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), subjectLookupTimeout)
		defer cancel()
		_, err := st.ServiceAccounts.Get(ctx, namespace, name)
		return err == nil
	}
	c.creds = informer.New[*apiv1.Credential](st.Credentials, store.ListOptions{}, log.With("informer", "credentials"))
	c.creds.AddIndex(bySerial, func(cr *apiv1.Credential) []string {
		if s := cr.GetSpec().GetCertificateSerial(); s != "" {
			return []string{s}
		}
		return nil
	})
	c.creds.AddIndex(bySubject, func(cr *apiv1.Credential) []string { return []string{subjectKey(cr.GetSpec().GetSubject())} })
	c.creds.AddHandler(informer.Handler[*apiv1.Credential]{
		OnUpdate: func(_, cr *apiv1.Credential) {
			if err := c.valid(cr); err != nil {
				c.cut(cr.GetMetadata().GetName(), err)
			}
		},
		OnDelete: func(cr *apiv1.Credential) {
			c.cut(cr.GetMetadata().GetName(), status.Errorf(codes.Unauthenticated, "credential %s was deleted", cr.GetMetadata().GetName()))
		},
	})
	c.users = informer.New[*apiv1.User](st.Users, store.ListOptions{}, log.With("informer", "users"))
	c.users.AddHandler(informer.Handler[*apiv1.User]{
		OnUpdate: func(_, u *apiv1.User) {
			if u.GetSpec().GetDisabled() {
				c.cutSubject(&apiv1.Subject{Kind: apiv1.SubjectUser, Name: u.GetMetadata().GetName()}, "was disabled")
			}
		},
		OnDelete: func(u *apiv1.User) {
			c.cutSubject(&apiv1.Subject{Kind: apiv1.SubjectUser, Name: u.GetMetadata().GetName()}, "was deleted")
		},
	})
	c.sas = informer.New[*apiv1.ServiceAccount](st.ServiceAccounts, store.ListOptions{}, log.With("informer", "serviceaccounts"))
	c.sas.AddHandler(informer.Handler[*apiv1.ServiceAccount]{
		OnDelete: func(sa *apiv1.ServiceAccount) {
			md := sa.GetMetadata()
			c.cutSubject(&apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: md.GetNamespace(), Name: md.GetName()}, "was deleted")
		},
	})
	return c
}

func (c *userCreds) run(ctx context.Context) {
	if c.creds == nil {
		return
	}
	go c.users.Run(ctx)
	go c.sas.Run(ctx)
	c.creds.Run(ctx)
}

func (c *userCreds) ready() error {
	if c.creds == nil {
		return status.Error(codes.Unauthenticated, "this server accepts no user credentials")
	}
	if !c.creds.HasSynced() || !c.users.HasSynced() || !c.sas.HasSynced() {
		return status.Error(codes.Unavailable, "credentials are still loading; retry")
	}
	return nil
}

// tokenSHA256 is what a Credential stores of a token's secret.
func tokenSHA256(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// authenticateToken accepts "vpt_<credential name>.<secret>" while its
// credential is valid (valid).
func (c *userCreds) authenticateToken(tok string) (Identity, error) {
	if err := c.ready(); err != nil {
		return Identity{}, err
	}
	name, secret, ok := strings.Cut(strings.TrimPrefix(tok, apiv1.TokenPrefix), ".")
	if !ok || name == "" || secret == "" {
		return Identity{}, status.Errorf(codes.Unauthenticated, "invalid bearer token: a user token is %s<credential>.<secret>", apiv1.TokenPrefix)
	}
	cr, ok := c.lookup(name)
	// Compared in constant time even when there is no such credential,
	// so the time of a refusal does not tell which names exist.
	want := cr.GetSpec().GetTokenSha256()
	if len(want) != sha256.Size {
		want = make([]byte, sha256.Size)
	}
	match := subtle.ConstantTimeCompare(tokenSHA256(secret), want) == 1
	if !ok || !match || cr.GetSpec().GetType() != apiv1.CredentialToken {
		return Identity{}, status.Errorf(codes.Unauthenticated, "invalid bearer token: credential %s is unknown (deleted or never issued) or the secret is wrong", name)
	}
	if err := c.valid(cr); err != nil {
		return Identity{}, err
	}
	return credentialIdentity(cr), nil
}

// authenticateCert accepts a verified client certificate of a user or
// service account while a valid credential of that subject lists its
// serial.
func (c *userCreds) authenticateCert(kind, namespace, name, serial string) (Identity, error) {
	if err := c.ready(); err != nil {
		return Identity{}, err
	}
	subj := &apiv1.Subject{Kind: apiv1.SubjectUser, Name: name}
	if kind == pki.UserCertServiceAccount {
		subj = &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: namespace, Name: name}
	}
	found := c.creds.ByIndex(bySerial, serial)
	if len(found) == 0 {
		// The certificate is the agent CA's (the TLS handshake checked
		// it): only a certificate issued a moment ago is missing here.
		found = c.certStored(serial)
	}
	for _, cr := range found {
		if cr.GetSpec().GetType() != apiv1.CredentialCertificate || subjectKey(cr.GetSpec().GetSubject()) != subjectKey(subj) {
			continue
		}
		if err := c.valid(cr); err != nil {
			return Identity{}, err
		}
		id := credentialIdentity(cr)
		id.Serial = serial
		return id, nil
	}
	return Identity{}, status.Errorf(codes.Unauthenticated, "client certificate %s of %s was never issued or its credential was deleted", serial, subjectKey(subj))
}

func credentialIdentity(cr *apiv1.Credential) Identity {
	s := cr.GetSpec().GetSubject()
	id := Identity{Kind: User, Name: s.GetName(), Credential: cr.GetMetadata().GetName(), Expires: cr.GetSpec().GetExpires().AsTime()}
	if s.GetKind() == apiv1.SubjectServiceAccount {
		id.Kind, id.Namespace = ServiceAccount, s.GetNamespace()
	}
	return id
}

// valid is nil while cr may authenticate: not revoked, not expired, and
// its subject exists (a user not disabled).
func (c *userCreds) valid(cr *apiv1.Credential) error {
	name, spec := cr.GetMetadata().GetName(), cr.GetSpec()
	switch {
	case spec.GetRevoked():
		return status.Errorf(codes.Unauthenticated, "credential %s was revoked", name)
	case spec.GetExpires() == nil || !c.clock().Before(spec.GetExpires().AsTime()):
		return status.Errorf(codes.Unauthenticated, "credential %s expired at %s: ask for a new one", name, spec.GetExpires().AsTime().UTC().Format(time.RFC3339))
	}
	s := spec.GetSubject()
	switch s.GetKind() {
	case apiv1.SubjectUser:
		u, ok := c.users.Get("", s.GetName())
		if !ok {
			u, ok = c.userStored(s.GetName())
		}
		if !ok {
			return status.Errorf(codes.Unauthenticated, "credential %s: user %s was deleted", name, s.GetName())
		}
		if u.GetSpec().GetDisabled() {
			return status.Errorf(codes.Unauthenticated, "credential %s: user %s is disabled", name, s.GetName())
		}
	case apiv1.SubjectServiceAccount:
		if _, ok := c.sas.Get(s.GetNamespace(), s.GetName()); !ok && !c.saStored(s.GetNamespace(), s.GetName()) {
			return status.Errorf(codes.Unauthenticated, "credential %s: serviceaccount %s/%s was deleted", name, s.GetNamespace(), s.GetName())
		}
	default:
		return status.Errorf(codes.Unauthenticated, "credential %s has no valid subject", name)
	}
	return nil
}

// lookup is the credential of name from the cache, or from the store when
// the cache has not seen it yet (a token used the moment it was issued).
// Only a name as the server makes them is read from the store: a token
// that cannot be one costs no store read.
func (c *userCreds) lookup(name string) (*apiv1.Credential, bool) {
	if cr, ok := c.creds.Get("", name); ok {
		return cr, true
	}
	if !credentialName.MatchString(name) {
		return nil, false
	}
	return c.credStored(name)
}

// track returns ctx cancelled when the call ends or when its credential
// stops being valid.
func (c *userCreds) track(ctx context.Context, id Identity) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	tc := &trackedCall{serial: id.Credential, cancel: cancel, subject: subjectKey(id.Subject())}
	ctx = context.WithValue(ctx, trackedCallKey{}, tc)
	c.mu.Lock()
	if c.calls[id.Credential] == nil {
		c.calls[id.Credential] = map[*trackedCall]struct{}{}
	}
	c.calls[id.Credential][tc] = struct{}{}
	c.mu.Unlock()
	// A credential revoked between authentication and here would miss its
	// cut: look again now that the call is tracked.
	if cr, ok := c.lookup(id.Credential); !ok {
		cancel(status.Errorf(codes.Unauthenticated, "credential %s was deleted", id.Credential))
	} else if err := c.valid(cr); err != nil {
		cancel(err)
	}
	// An open call ends when its credential expires, as a new one would
	// be refused then.
	if !id.Expires.IsZero() {
		expiry := time.AfterFunc(id.Expires.Sub(c.clock()), func() {
			cancel(status.Errorf(codes.Unauthenticated, "credential %s expired", id.Credential))
		})
		context.AfterFunc(ctx, func() { expiry.Stop() })
	}
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		delete(c.calls[id.Credential], tc)
		if len(c.calls[id.Credential]) == 0 {
			delete(c.calls, id.Credential)
		}
		c.mu.Unlock()
	})
	return ctx
}

// cut cancels the open calls of credential name with err.
func (c *userCreds) cut(name string, err error) {
	c.mu.Lock()
	calls := make([]*trackedCall, 0, len(c.calls[name]))
	for tc := range c.calls[name] {
		calls = append(calls, tc)
	}
	c.mu.Unlock()
	for _, tc := range calls {
		tc.cancel(err)
	}
}

// cutSubject cancels the open calls of every credential of s.
func (c *userCreds) cutSubject(s *apiv1.Subject, why string) {
	for _, cr := range c.creds.ByIndex(bySubject, subjectKey(s)) {
		c.cut(cr.GetMetadata().GetName(), status.Errorf(codes.Unauthenticated, "credential %s: %s %s", cr.GetMetadata().GetName(), subjectKey(s), why))
	}
}

type trackedCallKey struct{}

// keepCheck keeps how the call of ctx was authorized, for recheck.
func keepCheck(ctx context.Context, check callCheck) {
	if tc, ok := ctx.Value(trackedCallKey{}).(*trackedCall); ok {
		tc.mu.Lock()
		tc.check = &check
		tc.mu.Unlock()
	}
}

// recheckSubjects decides again the open calls of the subjects keys
// (their bindings changed) and ends those now refused.
func (c *userCreds) recheckSubjects(keys []string, recheck func(callCheck) error) {
	c.mu.Lock()
	var calls []*trackedCall
	for _, byCred := range c.calls {
		for tc := range byCred {
			if slices.Contains(keys, tc.subject) {
				calls = append(calls, tc)
			}
		}
	}
	c.mu.Unlock()
	for _, tc := range calls {
		tc.mu.Lock()
		check := tc.check
		tc.mu.Unlock()
		if check == nil {
			continue
		}
		if err := recheck(*check); err != nil {
			tc.cancel(err)
		}
	}
}
