package apiserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The role matrix (issue 36's acceptance): every method of the API is
// called over real gRPC, with real tokens and certificates, as each kind
// of caller, with a request in namespace a built from the method's
// descriptor; the answer must be what the method's entry in methodRules
// says for that caller. A method without an entry fails.
//
// Allowed is any answer but PermissionDenied, Unauthenticated and
// Internal (the
// handler may well find nothing, or refuse the minimal request as
// invalid); refused is exactly that code. A stream let through may wait
// for data: its deadline passing counts as allowed. For the node, the
// entry is nodeRules: a method outside it is refused as not for nodes;
// inside it, the rule's own checks of the request (covered by the node
// tests) may still refuse a request that is not the node's.

// matrixCaller is one column of the matrix.
type matrixCaller struct {
	name string
	conn *grpc.ClientConn
	// cluster and ns are the roles the caller was bound to (the test's
	// own record, not the server's).
	cluster role
	ns      map[string]role
	// unauthenticated callers (revoked, expired) are refused every call.
	unauthenticated bool
	node            string
}

// expect is what the entry says of c: allowed or the refusal's code.
func (c matrixCaller) expect(method string, rule methodRule) (allowed bool, code codes.Code) {
	switch {
	case c.unauthenticated:
		return false, codes.Unauthenticated
	case c.node != "":
		_, ok := nodeRules[method]
		return ok || rule.scope == scopeSelf, codes.PermissionDenied
	case c.cluster == roleClusterAdmin:
		return true, codes.OK
	}
	highest := c.cluster
	for _, r := range c.ns {
		highest = max(highest, r)
	}
	switch rule.scope {
	case scopeJoin, scopeSelf:
		return true, codes.OK
	case scopeCluster:
		return c.cluster >= rule.role, codes.PermissionDenied
	case scopeBound:
		return highest >= rule.role, codes.PermissionDenied
	default: // scopeNamespace: every request of the matrix acts in a
		return max(c.cluster, c.ns["a"]) >= rule.role, codes.PermissionDenied
	}
}

// Fixtures the requests name where the entry reads a stored object: an
// image owned by a, a service account of a and a credential of it.
const (
	fixtureImage = "img-a"
	fixtureSA    = "fix"
	fixtureCred  = "cred-fixture"
)

func (e *secEnv) ensureFixtures() {
	e.t.Helper()
	c := context.Background()
	if _, err := e.st.Images.Get(c, "", fixtureImage); errors.Is(err, store.ErrNotFound) {
		_, err = e.st.Images.Create(c, &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: fixtureImage, Labels: map[string]string{apiv1.LabelOwnerNamespace: "a"}},
			Spec: &apiv1.ImageSpec{Url: "https://example.com/a.qcow2"}})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.st.Credentials.Get(c, "", fixtureCred); errors.Is(err, store.ErrNotFound) {
		_, err = e.st.Credentials.Create(c, &apiv1.Credential{Metadata: &apiv1.ObjectMeta{Name: fixtureCred},
			Spec: &apiv1.CredentialSpec{Subject: &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: "a", Name: fixtureSA},
				Type: apiv1.CredentialToken, TokenSha256: tokenSHA256("unused"), Expires: timestamppb.New(time.Now().Add(time.Hour))}})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

var (
	objectKeyDesc = (&apiv1.ObjectKey{}).ProtoReflect().Descriptor()
	objectMetaDsc = (&apiv1.ObjectMeta{}).ProtoReflect().Descriptor()
)

// matrixRequest is a minimal request of method in namespace a: keys,
// options and objects name namespace a (and object "x"); where the entry
// reads a stored object, the fixture; a node's request names the node,
// as its rule requires.
func matrixRequest(method string, in protoreflect.MessageType, node string) proto.Message {
	req := in.New()
	fillNamespace(req, node, 0)
	switch method {
	case apiv1.Namespaces_Get_FullMethodName:
		req.Interface().(*apiv1.GetNamespaceRequest).Name = "a"
	case apiv1.Images_Create_FullMethodName:
		req.Interface().(*apiv1.CreateImageRequest).Image = &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "x", Labels: map[string]string{apiv1.LabelOwnerNamespace: "a"}}}
	case apiv1.Images_Update_FullMethodName:
		req.Interface().(*apiv1.UpdateImageRequest).Image = &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: fixtureImage, Labels: map[string]string{apiv1.LabelOwnerNamespace: "a"}}}
	case apiv1.Images_Delete_FullMethodName:
		req.Interface().(*apiv1.DeleteImageRequest).Name = fixtureImage
	case apiv1.ImageUploads_Begin_FullMethodName:
		req.Interface().(*apiv1.BeginImageUploadRequest).Name = fixtureImage
	case apiv1.ImageUploads_Write_FullMethodName:
		req.Interface().(*apiv1.ImageUploadChunk).Name = fixtureImage
	case apiv1.ImageUploads_Commit_FullMethodName:
		req.Interface().(*apiv1.CommitImageUploadRequest).Name = fixtureImage
	case apiv1.Credentials_IssueToken_FullMethodName, apiv1.Credentials_IssueCertificate_FullMethodName, apiv1.Credentials_List_FullMethodName:
		f := req.Descriptor().Fields().ByName("subject")
		req.Set(f, protoreflect.ValueOfMessage((&apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: "a", Name: fixtureSA}).ProtoReflect()))
	case apiv1.Credentials_Get_FullMethodName, apiv1.Credentials_Revoke_FullMethodName, apiv1.Credentials_Delete_FullMethodName:
		req.Set(req.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString(fixtureCred))
	}
	return req.Interface()
}

// fillNamespace sets, in msg and the messages it holds (two levels),
// keys and objects to a/x, options to namespace a, and names of nodes
// (and, for a node, every name) to the node's.
func fillNamespace(msg protoreflect.Message, node string, depth int) {
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.IsList() || f.IsMap() {
			continue
		}
		switch {
		case f.Kind() == protoreflect.StringKind && (f.Name() == "node" || f.Name() == "node_name"):
			if node != "" {
				msg.Set(f, protoreflect.ValueOfString(node))
			}
		case f.Kind() == protoreflect.StringKind && f.Name() == "name" && depth == 0:
			if node != "" {
				msg.Set(f, protoreflect.ValueOfString(node))
			} else {
				msg.Set(f, protoreflect.ValueOfString("x"))
			}
		case f.Message() == nil || depth >= 2:
		case f.Message() == objectKeyDesc || f.Message().FullName() == consoleOpenName || f.Message() == objectMetaDsc:
			sub := msg.Mutable(f).Message()
			sub.Set(sub.Descriptor().Fields().ByName("namespace"), protoreflect.ValueOfString("a"))
			name := "x"
			if node != "" && f.Message() == objectMetaDsc {
				name = node
			}
			sub.Set(sub.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString(name))
		case f.Message().FullName() == listOptionsName || f.Message().FullName() == watchOptionsName:
			sub := msg.Mutable(f).Message()
			sub.Set(sub.Descriptor().Fields().ByName("namespace"), protoreflect.ValueOfString("a"))
			if node != "" {
				sub.Set(sub.Descriptor().Fields().ByName("label_selector"), protoreflect.ValueOfString(apiv1.LabelNodeName+"="+node))
			}
		case f.Message().FullName() == "google.protobuf.Timestamp":
		default:
			fillNamespace(msg.Mutable(f).Message(), node, depth+1)
		}
	}
}

// callMethod calls method over conn with req: a unary call, or a stream
// that sends req, closes its side and reads one answer.
func callMethod(conn *grpc.ClientConn, md protoreflect.MethodDescriptor, full string, req proto.Message) error {
	out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp := out.New().Interface()
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return conn.Invoke(c, full, req, resp)
	}
	st, err := conn.NewStream(c, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, full)
	if err != nil {
		return err
	}
	if err := st.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = st.CloseSend()
	err = st.RecvMsg(resp)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func TestAuthorizationMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("calls every method as eight callers")
	}
	e := newSecEnv(t, Limits{AdminRate: 1e6, AdminBurst: 1e6, NodeRate: 1e6, NodeBurst: 1e6, AdminStreams: 1000, NodeStreams: 1000})
	admin := e.admin()
	if _, err := apiv1.NewServiceAccountsClient(admin.Conn).Create(ctx(), &apiv1.CreateServiceAccountRequest{ServiceAccount: &apiv1.ServiceAccount{
		Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: fixtureSA}}}); err != nil {
		t.Fatal(err)
	}
	root := e.user("root", "cluster-admin")
	ada := e.user("ada", "admin a")
	eddie := e.user("eddie", "edit a")
	vic := e.user("vic", "view a")
	bob := e.user("bob", "edit b")
	revoked := e.user("rev", "edit a")
	if _, err := apiv1.NewCredentialsClient(admin.Conn).Revoke(ctx(), &apiv1.RevokeCredentialRequest{Name: revoked.cred}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 10*time.Second, "revoked token refused", func() error {
		_, err := apiv1.NewAuthClient(revoked.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		if status.Code(err) != codes.Unauthenticated {
			return errors.New("still accepted")
		}
		return nil
	})
	expired := e.issue(eddie.sub, time.Minute)
	testutil.EventuallyNoError(t, 10*time.Second, "short token known", func() error {
		_, err := apiv1.NewAuthClient(expired.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		return err
	})
	node := e.join("n1")
	e.clock.Step(2 * time.Minute)

	callers := []matrixCaller{
		{name: "revoked token", conn: revoked.c.Conn, unauthenticated: true},
		{name: "expired token", conn: expired.c.Conn, unauthenticated: true},
		{name: "node n1", conn: node.c.Conn, node: "n1"},
		{name: "view of a", conn: vic.c.Conn, ns: map[string]role{"a": roleView}},
		{name: "edit of b", conn: bob.c.Conn, ns: map[string]role{"b": roleEdit}},
		{name: "edit of a", conn: eddie.c.Conn, ns: map[string]role{"a": roleEdit}},
		{name: "admin of a", conn: ada.c.Conn, ns: map[string]role{"a": roleAdmin}},
		{name: "cluster-admin", conn: root.c.Conn, cluster: roleClusterAdmin},
	}
	methods := 0
	for _, sd := range apiv1.Services() {
		ms := sd.Methods()
		for j := range ms.Len() {
			md := ms.Get(j)
			full := "/" + string(sd.FullName()) + "/" + string(md.Name())
			rule, ok := methodRules[full]
			if !ok {
				t.Errorf("%s: no entry in methodRules", full)
				continue
			}
			in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
			if err != nil {
				t.Fatal(err)
			}
			methods++
			for _, c := range callers {
				e.ensureFixtures()
				err := callMethod(c.conn, md, full, matrixRequest(full, in, c.node))
				allowed, want := c.expect(full, rule)
				got := status.Code(err)
				switch {
				case allowed && c.node != "" && got == codes.PermissionDenied && strings.Contains(status.Convert(err).Message(), "not for nodes"):
					t.Errorf("%s as %s: refused by the table (%v), nodeRules allow it", shortMethod(full), c.name, err)
				case allowed && got == codes.Internal:
					t.Errorf("%s as %s: %v", shortMethod(full), c.name, err)
				case allowed && c.node == "" && (got == codes.PermissionDenied || got == codes.Unauthenticated):
					t.Errorf("%s as %s: %v, the table allows it", shortMethod(full), c.name, err)
				case !allowed && got != want:
					t.Errorf("%s as %s: %v, the table refuses it (%s)", shortMethod(full), c.name, err, want)
				}
			}
		}
	}
	t.Logf("%d methods × %d callers", methods, len(callers))
}
