package command

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// fakeTenancy is an in-memory stand-in for the tenancy services (one
// type per service, sharing one lock and resource version), with what the
// commands' tests look at: the requests they send, objects by key, and
// refusals worded as the server words them.
type fakeTenancy struct {
	mu sync.Mutex
	rv int64

	namespaces tenancyObjects[*apiv1.Namespace]
	users      tenancyObjects[*apiv1.User]
	accounts   tenancyObjects[*apiv1.ServiceAccount]
	creds      tenancyObjects[*apiv1.Credential]
	bindings   tenancyObjects[*apiv1.RoleBinding]
	cluster    tenancyObjects[*apiv1.ClusterRoleBinding]

	// conflicts makes the next n updates fail Aborted.
	conflicts int
	// deny, when set, refuses every write with PermissionDenied and this
	// message.
	deny      string
	lastToken *apiv1.IssueTokenRequest
	lastCert  *apiv1.IssueCertificateRequest
	lastList  *apiv1.ListCredentialsRequest
	lastAudit *apiv1.ReadAuditRequest
	lastCanI  *apiv1.CanIRequest
	records   []*apiv1.AuditRecord
}

// tenancyObjects are one kind's objects by namespace/name.
type tenancyObjects[T metaMessage] map[string]T

type metaMessage interface {
	proto.Message
	GetMetadata() *apiv1.ObjectMeta
}

func fakeKey(ns, name string) string { return ns + "/" + name }

func newFakeTenancy() *fakeTenancy {
	return &fakeTenancy{
		namespaces: tenancyObjects[*apiv1.Namespace]{}, users: tenancyObjects[*apiv1.User]{},
		accounts: tenancyObjects[*apiv1.ServiceAccount]{}, creds: tenancyObjects[*apiv1.Credential]{},
		bindings: tenancyObjects[*apiv1.RoleBinding]{}, cluster: tenancyObjects[*apiv1.ClusterRoleBinding]{},
	}
}

func (f *fakeTenancy) register(srv *grpc.Server) {
	apiv1.RegisterNamespacesServer(srv, fakeNamespaces{f: f})
	apiv1.RegisterUsersServer(srv, fakeUsers{f: f})
	apiv1.RegisterServiceAccountsServer(srv, fakeAccounts{f: f})
	apiv1.RegisterCredentialsServer(srv, fakeCredentials{f: f})
	apiv1.RegisterRoleBindingsServer(srv, fakeBindings{f: f})
	apiv1.RegisterClusterRoleBindingsServer(srv, fakeClusterBindings{f: f})
	apiv1.RegisterAuthServer(srv, fakeAuth{f: f})
	apiv1.RegisterAuditServer(srv, fakeAudit{f: f})
}

func (f *fakeTenancy) locked(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// tcreate, tget, tupdate, tremove and tlist are one kind's calls on objs.
func tcreate[T metaMessage](f *fakeTenancy, objs tenancyObjects[T], in T) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	if f.deny != "" {
		return zero, status.Error(codes.PermissionDenied, f.deny)
	}
	m := in.GetMetadata()
	k := fakeKey(m.GetNamespace(), m.GetName())
	if _, ok := objs[k]; ok {
		return zero, status.Errorf(codes.AlreadyExists, "%s exists", k)
	}
	obj := proto.Clone(in).(T)
	f.rv++
	obj.GetMetadata().ResourceVersion = f.rv
	obj.GetMetadata().Uid = fmt.Sprintf("uid-%d", f.rv)
	obj.GetMetadata().CreationTimestamp = timestamppb.New(time.Now().Add(-2 * time.Hour))
	objs[k] = obj
	return proto.Clone(obj).(T), nil
}

func tget[T metaMessage](f *fakeTenancy, objs tenancyObjects[T], ns, name string) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, ok := objs[fakeKey(ns, name)]
	if !ok {
		var zero T
		return zero, status.Errorf(codes.NotFound, "%s not found", fakeKey(ns, name))
	}
	return proto.Clone(obj).(T), nil
}

func tupdate[T metaMessage](f *fakeTenancy, objs tenancyObjects[T], in T) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	m := in.GetMetadata()
	old, ok := objs[fakeKey(m.GetNamespace(), m.GetName())]
	switch {
	case f.deny != "":
		return zero, status.Error(codes.PermissionDenied, f.deny)
	case !ok:
		return zero, status.Error(codes.NotFound, "not found")
	case f.conflicts > 0 || m.GetResourceVersion() != old.GetMetadata().GetResourceVersion():
		f.conflicts--
		return zero, status.Error(codes.Aborted, "the object has been modified")
	}
	obj := proto.Clone(in).(T)
	f.rv++
	obj.GetMetadata().ResourceVersion = f.rv
	objs[fakeKey(m.GetNamespace(), m.GetName())] = obj
	return proto.Clone(obj).(T), nil
}

func tremove[T metaMessage](f *fakeTenancy, objs tenancyObjects[T], ns, name string) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	if f.deny != "" {
		return zero, status.Error(codes.PermissionDenied, f.deny)
	}
	obj, ok := objs[fakeKey(ns, name)]
	if !ok {
		return zero, status.Errorf(codes.NotFound, "%s not found", fakeKey(ns, name))
	}
	delete(objs, fakeKey(ns, name))
	return obj, nil
}

func tlist[T metaMessage](f *fakeTenancy, objs tenancyObjects[T], ns string) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, k := range sortedKeys(objs) {
		if o := objs[k]; ns == "" || o.GetMetadata().GetNamespace() == ns {
			out = append(out, proto.Clone(o).(T))
		}
	}
	return out
}

type fakeNamespaces struct {
	apiv1.UnimplementedNamespacesServer
	f *fakeTenancy
}

func (s fakeNamespaces) Create(_ context.Context, req *apiv1.CreateNamespaceRequest) (*apiv1.Namespace, error) {
	return tcreate(s.f, s.f.namespaces, req.GetNamespace())
}

func (s fakeNamespaces) Get(_ context.Context, req *apiv1.GetNamespaceRequest) (*apiv1.Namespace, error) {
	return tget(s.f, s.f.namespaces, "", req.GetName())
}

func (s fakeNamespaces) List(_ context.Context, req *apiv1.ListNamespacesRequest) (*apiv1.ListNamespacesResponse, error) {
	return &apiv1.ListNamespacesResponse{Items: tlist(s.f, s.f.namespaces, "")}, nil
}

// Update takes the spec and keeps the status, as the server does.
func (s fakeNamespaces) Update(_ context.Context, req *apiv1.UpdateNamespaceRequest) (*apiv1.Namespace, error) {
	in := proto.Clone(req.GetNamespace()).(*apiv1.Namespace)
	if cur, err := tget(s.f, s.f.namespaces, "", in.GetMetadata().GetName()); err == nil {
		in.Status = cur.Status
	}
	return tupdate(s.f, s.f.namespaces, in)
}

func (s fakeNamespaces) Delete(_ context.Context, req *apiv1.DeleteNamespaceRequest) (*apiv1.Namespace, error) {
	return tremove(s.f, s.f.namespaces, "", req.GetName())
}

type fakeUsers struct {
	apiv1.UnimplementedUsersServer
	f *fakeTenancy
}

func (s fakeUsers) Create(_ context.Context, req *apiv1.CreateUserRequest) (*apiv1.User, error) {
	return tcreate(s.f, s.f.users, req.GetUser())
}

func (s fakeUsers) Get(_ context.Context, req *apiv1.GetUserRequest) (*apiv1.User, error) {
	return tget(s.f, s.f.users, "", req.GetName())
}

func (s fakeUsers) List(context.Context, *apiv1.ListUsersRequest) (*apiv1.ListUsersResponse, error) {
	return &apiv1.ListUsersResponse{Items: tlist(s.f, s.f.users, "")}, nil
}

func (s fakeUsers) Update(_ context.Context, req *apiv1.UpdateUserRequest) (*apiv1.User, error) {
	return tupdate(s.f, s.f.users, req.GetUser())
}

func (s fakeUsers) Delete(_ context.Context, req *apiv1.DeleteUserRequest) (*apiv1.User, error) {
	return tremove(s.f, s.f.users, "", req.GetName())
}

type fakeAccounts struct {
	apiv1.UnimplementedServiceAccountsServer
	f *fakeTenancy
}

func (s fakeAccounts) Create(_ context.Context, req *apiv1.CreateServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	return tcreate(s.f, s.f.accounts, req.GetServiceAccount())
}

func (s fakeAccounts) Get(_ context.Context, req *apiv1.GetServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	return tget(s.f, s.f.accounts, req.GetKey().GetNamespace(), req.GetKey().GetName())
}

func (s fakeAccounts) List(_ context.Context, req *apiv1.ListServiceAccountsRequest) (*apiv1.ListServiceAccountsResponse, error) {
	return &apiv1.ListServiceAccountsResponse{Items: tlist(s.f, s.f.accounts, req.GetOptions().GetNamespace())}, nil
}

func (s fakeAccounts) Delete(_ context.Context, req *apiv1.DeleteServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	return tremove(s.f, s.f.accounts, req.GetKey().GetNamespace(), req.GetKey().GetName())
}

type fakeCredentials struct {
	apiv1.UnimplementedCredentialsServer
	f *fakeTenancy
}

func (s fakeCredentials) issue(subject *apiv1.Subject, typ, description string, ttl int64) (*apiv1.Credential, error) {
	s.f.mu.Lock()
	name := fmt.Sprintf("cred-%04x", s.f.rv+1)
	s.f.mu.Unlock()
	if ttl == 0 {
		ttl = 90 * 24 * 3600
	}
	return tcreate(s.f, s.f.creds, &apiv1.Credential{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.CredentialSpec{Subject: subject, Type: typ, Description: description,
			Expires: timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(ttl) * time.Second))},
		Status: &apiv1.CredentialStatus{IssuedBy: "admin"},
	})
}

func (s fakeCredentials) IssueToken(_ context.Context, req *apiv1.IssueTokenRequest) (*apiv1.IssueTokenResponse, error) {
	s.f.locked(func() { s.f.lastToken = req })
	cred, err := s.issue(req.GetSubject(), apiv1.CredentialToken, req.GetDescription(), req.GetTtlSeconds())
	if err != nil {
		return nil, err
	}
	return &apiv1.IssueTokenResponse{Token: apiv1.TokenPrefix + cred.GetMetadata().GetName() + ".s3cr3t", Credential: cred}, nil
}

func (s fakeCredentials) IssueCertificate(_ context.Context, req *apiv1.IssueCertificateRequest) (*apiv1.IssueCertificateResponse, error) {
	s.f.locked(func() { s.f.lastCert = req })
	cred, err := s.issue(req.GetSubject(), apiv1.CredentialCertificate, req.GetDescription(), req.GetTtlSeconds())
	if err != nil {
		return nil, err
	}
	return &apiv1.IssueCertificateResponse{CertificatePem: []byte("CERT\n"), CaPem: []byte("CA\n"), Credential: cred}, nil
}

func (s fakeCredentials) Get(_ context.Context, req *apiv1.GetCredentialRequest) (*apiv1.Credential, error) {
	return tget(s.f, s.f.creds, "", req.GetName())
}

func (s fakeCredentials) List(_ context.Context, req *apiv1.ListCredentialsRequest) (*apiv1.ListCredentialsResponse, error) {
	s.f.locked(func() { s.f.lastList = req })
	var items []*apiv1.Credential
	for _, c := range tlist(s.f, s.f.creds, "") {
		if req.GetSubject() == nil || proto.Equal(req.GetSubject(), c.GetSpec().GetSubject()) {
			items = append(items, c)
		}
	}
	return &apiv1.ListCredentialsResponse{Items: items}, nil
}

func (s fakeCredentials) Revoke(_ context.Context, req *apiv1.RevokeCredentialRequest) (*apiv1.Credential, error) {
	c, err := tget(s.f, s.f.creds, "", req.GetName())
	if err != nil {
		return nil, err
	}
	c.Spec.Revoked = true
	c.Status.RevokedBy = "admin"
	c.Status.RevokedAt = timestamppb.New(time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC))
	return tupdate(s.f, s.f.creds, c)
}

func (s fakeCredentials) Delete(_ context.Context, req *apiv1.DeleteCredentialRequest) (*apiv1.Credential, error) {
	return tremove(s.f, s.f.creds, "", req.GetName())
}

type fakeBindings struct {
	apiv1.UnimplementedRoleBindingsServer
	f *fakeTenancy
}

func (s fakeBindings) Create(_ context.Context, req *apiv1.CreateRoleBindingRequest) (*apiv1.RoleBinding, error) {
	return tcreate(s.f, s.f.bindings, req.GetRoleBinding())
}

func (s fakeBindings) Get(_ context.Context, req *apiv1.GetRoleBindingRequest) (*apiv1.RoleBinding, error) {
	return tget(s.f, s.f.bindings, req.GetKey().GetNamespace(), req.GetKey().GetName())
}

func (s fakeBindings) List(_ context.Context, req *apiv1.ListRoleBindingsRequest) (*apiv1.ListRoleBindingsResponse, error) {
	return &apiv1.ListRoleBindingsResponse{Items: tlist(s.f, s.f.bindings, req.GetOptions().GetNamespace())}, nil
}

func (s fakeBindings) Delete(_ context.Context, req *apiv1.DeleteRoleBindingRequest) (*apiv1.RoleBinding, error) {
	return tremove(s.f, s.f.bindings, req.GetKey().GetNamespace(), req.GetKey().GetName())
}

type fakeClusterBindings struct {
	apiv1.UnimplementedClusterRoleBindingsServer
	f *fakeTenancy
}

func (s fakeClusterBindings) Create(_ context.Context, req *apiv1.CreateClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	return tcreate(s.f, s.f.cluster, req.GetClusterRoleBinding())
}

func (s fakeClusterBindings) Get(_ context.Context, req *apiv1.GetClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	return tget(s.f, s.f.cluster, "", req.GetName())
}

func (s fakeClusterBindings) Update(_ context.Context, req *apiv1.UpdateClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	return tupdate(s.f, s.f.cluster, req.GetClusterRoleBinding())
}

func (s fakeClusterBindings) List(context.Context, *apiv1.ListClusterRoleBindingsRequest) (*apiv1.ListClusterRoleBindingsResponse, error) {
	return &apiv1.ListClusterRoleBindingsResponse{Items: tlist(s.f, s.f.cluster, "")}, nil
}

func (s fakeClusterBindings) Delete(_ context.Context, req *apiv1.DeleteClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	return tremove(s.f, s.f.cluster, "", req.GetName())
}

// fakeAuth answers as for the service account team-a/deployer with edit
// in team-a: it may create VMs in team-a, nothing in other namespaces.
type fakeAuth struct {
	apiv1.UnimplementedAuthServer
	f *fakeTenancy
}

func (s fakeAuth) WhoAmI(context.Context, *apiv1.WhoAmIRequest) (*apiv1.WhoAmIResponse, error) {
	return &apiv1.WhoAmIResponse{
		Identity:   "serviceaccount team-a/deployer",
		Subject:    &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: "team-a", Name: "deployer"},
		Credential: "cred-0001", Expires: timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		Roles: []string{"edit in team-a"},
	}, nil
}

func (s fakeAuth) CanI(_ context.Context, req *apiv1.CanIRequest) (*apiv1.CanIResponse, error) {
	s.f.locked(func() { s.f.lastCanI = req })
	if req.GetNamespace() == "team-a" {
		return &apiv1.CanIResponse{Allowed: true}, nil
	}
	return &apiv1.CanIResponse{Reason: "serviceaccount team-a/deployer (edit in team-a) may not call " + req.GetMethod() +
		": needs edit in " + req.GetNamespace()}, nil
}

type fakeAudit struct {
	apiv1.UnimplementedAuditServer
	f *fakeTenancy
}

func (s fakeAudit) Read(req *apiv1.ReadAuditRequest, stream apiv1.Audit_ReadServer) error {
	var records []*apiv1.AuditRecord
	s.f.locked(func() { s.f.lastAudit, records = req, s.f.records })
	for _, r := range records {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}
