package apiserver

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
)

// The audit trail (issue 36; docs/security.md, "Audit"): every call of a
// method that changes something, and every console, export and migration
// request, is recorded once with who made it, what it named and how it
// ended, whether it succeeded, failed in its handler or was refused by
// authentication or authorization. Reads are not recorded. A record
// never holds a request's or a response's body: tokens (IssueToken,
// CreateToken, Exports.Create answer with one), keys and cloud-init data
// stay out; the object's namespace and name are found by their field
// names (auditObject), the uid from the answer's metadata.
//
// Writing a record never fails the call (audit.Logger.Log): refusing
// users' calls because the log's disk is full would make the audit trail
// an outage; failures are logged and counted
// (virtplane_audit_write_failures_total) for an alert instead.

// AuditLog is where the API's records go (*audit.Logger).
type AuditLog interface {
	Log(audit.Record)
	Read(ctx context.Context, q audit.Query, emit func(audit.Record) error) error
}

// auditRole names the role id holds for a call in namespace ("edit in
// a", "cluster-admin"; namespace is "" for cluster-scoped objects and for
// calls refused before their request was read: then every role it
// holds), for the record's role field. It runs for every recorded call,
// in the transport's tap handle for refusals there, so it answers from
// the role caches alone.
func (s *Server) auditRole(id Identity, namespace string) string {
	switch id.Kind {
	case Anonymous:
		return ""
	case Node:
		return "node"
	}
	g, err := s.roles.grantsOf(id)
	if err != nil {
		return ""
	}
	if namespace == "" || g.cluster == roleClusterAdmin {
		return g.String()
	}
	if r := g.in(namespace); r != roleNone {
		return r.String() + " in " + namespace
	}
	return "no role in " + namespace
}

// auditClass is what the audit trail does with a method's calls.
type auditClass int

const (
	// auditNever: reads, which change nothing.
	auditNever auditClass = iota + 1
	// auditAlways: writes, and console, export and migration requests.
	auditAlways
	// auditNodeReport: the nodes' routine reports (heartbeats, status
	// writes, certificate renewals, serving a console an admin opened):
	// thousands a day per node, made by the system rather than by
	// people, so recorded only when a caller other than a node makes them,
	// or with Options.AuditNodeReports (--audit-node-reports).
	auditNodeReport
)

// auditVerbs classify methods by their name alone: the verbs every kind's
// service shares.
var auditVerbs = map[string]auditClass{
	"Get":          auditNever,
	"List":         auditNever,
	"Watch":        auditNever,
	"Create":       auditAlways,
	"Update":       auditAlways,
	"Delete":       auditAlways,
	"Scale":        auditAlways,
	"UpdateStatus": auditNodeReport,
}

// auditMethods classify every method whose name is not one of
// auditVerbs. TestEveryMethodIsAuditClassified fails while a method of
// the API is in neither, so each new verb is classified on purpose.
var auditMethods = map[string]auditClass{
	apiv1.Audit_Read_FullMethodName:  auditNever,
	apiv1.Auth_WhoAmI_FullMethodName: auditNever,
	apiv1.Auth_CanI_FullMethodName:   auditNever,
	// Nodes fetch what a backup or volume needs; they change nothing.
	apiv1.BackupTargets_Connect_FullMethodName:       auditNever,
	apiv1.BackupTargets_ListManifests_FullMethodName: auditNever,
	apiv1.StorageClasses_Connect_FullMethodName:      auditNever,
	apiv1.ImageUploads_Download_FullMethodName:       auditNever,
	// A node's stream of console requests: each request is an Attach,
	// recorded there.
	apiv1.Consoles_Sessions_FullMethodName: auditNever,
	apiv1.Consoles_Attach_FullMethodName:   auditAlways,
	apiv1.Consoles_Serve_FullMethodName:    auditNodeReport,

	apiv1.Bootstrap_CreateToken_FullMethodName:        auditAlways,
	apiv1.Bootstrap_Join_FullMethodName:               auditAlways,
	apiv1.Bootstrap_Renew_FullMethodName:              auditNodeReport,
	apiv1.Credentials_IssueToken_FullMethodName:       auditAlways,
	apiv1.Credentials_IssueCertificate_FullMethodName: auditAlways,
	apiv1.Credentials_Revoke_FullMethodName:           auditAlways,

	apiv1.ImageUploads_Begin_FullMethodName:      auditAlways,
	apiv1.ImageUploads_Write_FullMethodName:      auditAlways,
	apiv1.ImageUploads_Commit_FullMethodName:     auditAlways,
	apiv1.Images_UpdateNodeStatus_FullMethodName: auditNodeReport,

	// A node registers when its agent starts: rare, and it sets the
	// node's labels, which placement trusts.
	apiv1.Nodes_Register_FullMethodName:  auditAlways,
	apiv1.Nodes_Heartbeat_FullMethodName: auditNodeReport,
	apiv1.Nodes_Fence_FullMethodName:     auditAlways,
	apiv1.Nodes_Revoke_FullMethodName:    auditAlways,
	apiv1.Nodes_Cordon_FullMethodName:    auditAlways,
	apiv1.Nodes_Uncordon_FullMethodName:  auditAlways,
	apiv1.Nodes_Drain_FullMethodName:     auditAlways,
	apiv1.Nodes_Label_FullMethodName:     auditAlways,

	apiv1.VirtualMachineInstances_Evict_FullMethodName: auditAlways,
	apiv1.VirtualMachines_Start_FullMethodName:         auditAlways,
	apiv1.VirtualMachines_Stop_FullMethodName:          auditAlways,
	apiv1.VirtualMachines_Restart_FullMethodName:       auditAlways,
	apiv1.VirtualMachines_Pause_FullMethodName:         auditAlways,
	apiv1.VirtualMachines_Unpause_FullMethodName:       auditAlways,
	apiv1.VirtualMachines_Migrate_FullMethodName:       auditAlways,
	apiv1.VirtualMachines_AddVolume_FullMethodName:     auditAlways,
	apiv1.VirtualMachines_RemoveVolume_FullMethodName:  auditAlways,
}

// auditClassOf is the one definition of what is recorded: the method's
// entry in auditMethods, else its verb's in auditVerbs. A method in
// neither is recorded (the safe side) and fails the test.
func auditClassOf(fullMethod string) (auditClass, bool) {
	if c, ok := auditMethods[fullMethod]; ok {
		return c, true
	}
	_, verb := splitMethod(fullMethod)
	if c, ok := auditVerbs[verb]; ok {
		return c, true
	}
	return auditAlways, false
}

// audited reports whether id's call of method is recorded.
func (s *Server) audited(id Identity, method string) bool {
	if s.opts.Audit == nil {
		return false
	}
	switch c, _ := auditClassOf(method); c {
	case auditNever:
		return false
	case auditNodeReport:
		return id.Kind != Node || s.opts.AuditNodeReports
	}
	return true
}

// auditCall is what a record says about the call beyond its identity and
// its result.
type auditCall struct {
	method, namespace, name, uid string
}

// answer takes the uid of the object resp carries, its name when the
// request named none (a generated name) and its namespace when the
// request left it to the server (the default one).
func (c *auditCall) answer(resp any) {
	ns, name, uid := auditAnswer(resp)
	c.uid = uid
	if c.name == "" {
		c.name = name
	}
	if c.namespace == "" && c.name == name {
		c.namespace = ns
	}
}

// record writes the record of a call by id that ended with err.
func (s *Server) record(id Identity, c auditCall, err error) {
	st := status.Convert(err)
	s.opts.Audit.Log(audit.Record{
		Time:      s.opts.Clock(),
		Identity:  id.String(),
		Role:      s.auditRole(id, c.namespace),
		Method:    c.method,
		Namespace: c.namespace,
		Name:      c.name,
		UID:       c.uid,
		Code:      st.Code().String(),
		Message:   st.Message(),
		Peer:      id.Peer,
		Server:    s.opts.ServerName,
	})
}

// auditUnary records a unary call once its handler (and every check
// after this interceptor: authorization, leadership) has answered.
func (s *Server) auditUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	id := IdentityFrom(ctx)
	if !s.audited(id, info.FullMethod) {
		return h(ctx, req)
	}
	c := auditCall{method: info.FullMethod}
	c.namespace, c.name = auditObject(req)
	defer func() {
		if r := recover(); r != nil {
			// recoverUnary answers Internal; the record says so too.
			s.record(id, c, status.Error(codes.Internal, "internal error (logged by the server)"))
			panic(r)
		}
		c.answer(resp)
		s.record(id, c, err)
	}()
	return h(ctx, req)
}

// auditStream records a stream once, when it ends, with its final code: a
// console session's record comes when the session closes (its time is
// then the end's), and one refused at its start records that refusal.
// The object is the first message's (a console's open), the uid the
// first answer's.
func (s *Server) auditStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	id := IdentityFrom(ss.Context())
	if !s.audited(id, info.FullMethod) {
		return h(srv, ss)
	}
	as := &auditedStream{ServerStream: ss, call: auditCall{method: info.FullMethod}}
	defer func() {
		if r := recover(); r != nil {
			s.record(id, as.seen(), status.Error(codes.Internal, "internal error (logged by the server)"))
			panic(r)
		}
		s.record(id, as.seen(), err)
	}()
	return h(srv, as)
}

// auditedStream notes what a record needs from a stream's first request
// and first answer as they pass. A console's handler receives and sends
// on goroutines of their own, hence the lock.
type auditedStream struct {
	grpc.ServerStream
	mu          sync.Mutex
	call        auditCall
	recvd, sent bool
}

func (a *auditedStream) RecvMsg(m any) error {
	err := a.ServerStream.RecvMsg(m)
	if err == nil {
		a.mu.Lock()
		if !a.recvd {
			a.recvd = true
			a.call.namespace, a.call.name = auditObject(m)
		}
		a.mu.Unlock()
	}
	return err
}

func (a *auditedStream) SendMsg(m any) error {
	a.mu.Lock()
	if !a.sent {
		a.sent = true
		a.call.answer(m)
	}
	a.mu.Unlock()
	return a.ServerStream.SendMsg(m)
}

func (a *auditedStream) seen() auditCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.call
}

// auditRefused records a call the tap handle refused (unauthenticated,
// forbidden), before its request was read: no object is known. id is
// the caller when authentication succeeded, else the zero Identity
// (anonymous, from its address).
func (s *Server) auditRefused(ctx context.Context, info *tap.Info, id Identity, err error) {
	if id.Kind == Anonymous && id.Peer == "" {
		id.Peer = peerAddr(ctx)
	}
	if !s.audited(id, info.FullMethodName) {
		return
	}
	s.record(id, auditCall{method: info.FullMethodName}, err)
}

// peerAddr is the caller's address without its port, as authenticate
// names it ("unix" on the unix socket).
func peerAddr(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	if p.Addr.Network() == "unix" {
		return "unix"
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
