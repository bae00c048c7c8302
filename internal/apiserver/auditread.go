package apiserver

import (
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
)

// auditService serves Audit.Read: the records this server wrote, as its
// file and the rotated files it keeps hold them. Who may call it is
// authorization's table (cluster-admins); a server keeps only its own
// records, so a cluster's trail is the union of its servers' (the
// record's server field tells them apart).
type auditService struct {
	apiv1.UnimplementedAuditServer
	s *Server
}

func newAuditService(s *Server) apiv1.AuditServer { return &auditService{s: s} }

// Read streams the selected records oldest first: with since, the first
// limit at or after it (read on from the last one's time); without, the
// newest limit (audit.Query).
func (a *auditService) Read(req *apiv1.ReadAuditRequest, stream apiv1.Audit_ReadServer) error {
	log := a.s.opts.Audit
	if log == nil {
		return status.Error(codes.FailedPrecondition, "this server keeps no audit log (--audit-log is empty)")
	}
	q := audit.Query{Identity: req.GetIdentity(), Method: req.GetMethod(), Namespace: req.GetNamespace()}
	if req.GetLimit() < 0 || req.GetLimit() > audit.MaxReadLimit {
		return status.Errorf(codes.InvalidArgument, "limit: %d is out of range: from 0 (%d) to %d", req.GetLimit(), audit.DefaultReadLimit, audit.MaxReadLimit)
	}
	q.Limit = int(req.GetLimit())
	if req.Since != nil {
		if err := req.GetSince().CheckValid(); err != nil {
			return status.Errorf(codes.InvalidArgument, "since: %v", err)
		}
		q.Since = req.GetSince().AsTime()
	}
	err := log.Read(stream.Context(), q, func(r audit.Record) error {
		return stream.Send(auditRecordProto(r))
	})
	switch {
	case errors.Is(err, audit.ErrNoFile):
		return status.Error(codes.FailedPrecondition, "this server keeps no audit log file (--audit-log is empty; records go to syslog only)")
	case err != nil && stream.Context().Err() != nil:
		return status.FromContextError(stream.Context().Err()).Err()
	case err != nil && status.Code(err) == codes.Unknown:
		a.s.log.Error("reading the audit log", "err", err)
		return status.Error(codes.Internal, "reading the audit log failed (logged by the server)")
	}
	return err
}

func auditRecordProto(r audit.Record) *apiv1.AuditRecord {
	var t *timestamppb.Timestamp
	if !r.Time.Equal(time.Time{}) {
		t = timestamppb.New(r.Time)
	}
	return &apiv1.AuditRecord{
		Time: t, Identity: r.Identity, Role: r.Role, Method: r.Method, Namespace: r.Namespace,
		Name: r.Name, Uid: r.UID, Code: r.Code, Message: r.Message, Peer: r.Peer, Server: r.Server,
	}
}
