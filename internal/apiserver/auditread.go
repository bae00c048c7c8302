package apiserver

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// PLACEHOLDER until the audit trail lands on this branch (issue 36).
func newAuditService(*Server) apiv1.AuditServer { return apiv1.UnimplementedAuditServer{} }
