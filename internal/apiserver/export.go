package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// exportService is KubeVirt's VirtualMachineExport API. Create makes the
// export's token and keeps only its hash; the export controller decides
// the phase, the serving node and the links; the node labelled on the
// export serves it (docs/export.md).
type exportService struct {
	apiv1.UnimplementedExportsServer
	objects[*apiv1.VirtualMachineExport, *apiv1.ListExportsResponse, apiv1.ExportEvent]
	s *Server
}

func newExportService(s *Server) apiv1.ExportsServer {
	return &exportService{s: s, objects: objects[*apiv1.VirtualMachineExport, *apiv1.ListExportsResponse, apiv1.ExportEvent]{
		st: s.stores.Exports, log: s.log, kind: apiv1.KindExport, noun: "export", attr: "export",
		listResponse: func(p store.Page[*apiv1.VirtualMachineExport]) *apiv1.ListExportsResponse {
			return &apiv1.ListExportsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineExport, rev int64) *apiv1.ExportEvent {
			return &apiv1.ExportEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

// newExportToken is 256 random bits, URL-safe base64 (43 characters).
func newExportToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (v *exportService) Create(ctx context.Context, req *apiv1.CreateExportRequest) (*apiv1.CreateExportResponse, error) {
	e := requestCopy(req.GetExport())
	validation.DefaultExport(e)
	if errs := validation.ValidateExport(e); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindExport, e.GetMetadata().GetName(), errs)
	}
	ttl, _ := validation.ExportTTL(e.Spec.TtlDuration) // validated above
	token := newExportToken()
	e.Metadata = userMeta(e.Metadata)
	// The expiry is fixed when the token is made: the TTL counts from
	// here, whatever the controller's delay.
	e.Status = &apiv1.VirtualMachineExportStatus{
		Phase:          apiv1.ExportPending,
		TokenSha256:    apiv1.ExportTokenHash(token),
		ExpirationTime: timestamppb.New(v.s.opts.Clock().Add(ttl)),
	}
	out, err := v.create(ctx, e, "source_kind", e.Spec.SourceKind, "source", e.Spec.SourceName, "ttl", e.Spec.TtlDuration)
	if err != nil {
		return nil, err
	}
	return &apiv1.CreateExportResponse{Export: out, Token: token}, nil
}

func (v *exportService) Get(ctx context.Context, req *apiv1.GetExportRequest) (*apiv1.VirtualMachineExport, error) {
	return v.get(ctx, req.GetKey())
}

func (v *exportService) List(ctx context.Context, req *apiv1.ListExportsRequest) (*apiv1.ListExportsResponse, error) {
	return v.list(ctx, req.GetOptions())
}

func (v *exportService) UpdateStatus(ctx context.Context, req *apiv1.UpdateExportStatusRequest) (*apiv1.VirtualMachineExport, error) {
	return v.updateStatus(ctx, req.GetExport(), statusRule[*apiv1.VirtualMachineExport]{
		validate: func(in *apiv1.VirtualMachineExport) field.ErrorList {
			return validation.ValidateExportStatus(in.GetStatus(), field.NewPath("status"))
		},
		// The token's hash and the expiry are made with the token: no
		// status write replaces them.
		setStatus: func(next, in *apiv1.VirtualMachineExport) {
			st := in.GetStatus()
			if st == nil {
				st = &apiv1.VirtualMachineExportStatus{}
			}
			st.TokenSha256, st.ExpirationTime = next.GetStatus().GetTokenSha256(), next.GetStatus().GetExpirationTime()
			next.Status = st
		},
	})
}

func (v *exportService) Delete(ctx context.Context, req *apiv1.DeleteExportRequest) (*apiv1.VirtualMachineExport, error) {
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *exportService) Watch(req *apiv1.WatchExportsRequest, stream apiv1.Exports_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}
