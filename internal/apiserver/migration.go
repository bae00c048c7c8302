package apiserver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// migrationService is KubeVirt's VirtualMachineInstanceMigration API with
// its create admitter: a migration is refused up front when its instance
// cannot move now, and deleting one cancels it.
type migrationService struct {
	apiv1.UnimplementedMigrationsServer
	objects[*apiv1.VirtualMachineInstanceMigration, *apiv1.ListMigrationsResponse, apiv1.MigrationEvent]
	s *Server
}

func newMigrationService(s *Server) apiv1.MigrationsServer {
	return &migrationService{s: s, objects: objects[*apiv1.VirtualMachineInstanceMigration, *apiv1.ListMigrationsResponse, apiv1.MigrationEvent]{
		st: s.stores.Migrations, log: s.log,
		listResponse: func(p store.Page[*apiv1.VirtualMachineInstanceMigration]) *apiv1.ListMigrationsResponse {
			return &apiv1.ListMigrationsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineInstanceMigration, rev int64) *apiv1.MigrationEvent {
			return &apiv1.MigrationEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (m *migrationService) Create(ctx context.Context, req *apiv1.CreateMigrationRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	return m.s.createMigration(ctx, req.GetMigration())
}

// createMigration admits and stores a migration (Create and VMs.Migrate).
func (s *Server) createMigration(ctx context.Context, in *apiv1.VirtualMachineInstanceMigration) (*apiv1.VirtualMachineInstanceMigration, error) {
	mig, _ := proto.Clone(in).(*apiv1.VirtualMachineInstanceMigration)
	if mig == nil {
		mig = &apiv1.VirtualMachineInstanceMigration{}
	}
	validation.DiscardUnknown(mig)
	if mig.Metadata == nil {
		mig.Metadata = &apiv1.ObjectMeta{}
	}
	if mig.Metadata.Namespace == "" {
		mig.Metadata.Namespace = apiv1.DefaultNamespace
	}
	if mig.Metadata.Name == "" && mig.GetSpec().GetVmiName() != "" {
		mig.Metadata.Name = apiv1.MigrationName(mig.GetSpec().GetVmiName(), "migration")
	}
	ns, name := mig.Metadata.Namespace, mig.Metadata.Name
	if errs := validation.ValidateMigration(mig); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachineInstanceMigration", ns+"/"+name, errs)
	}
	vmiName := mig.GetSpec().GetVmiName()
	vmi, err := s.stores.VMIs.Get(ctx, ns, vmiName)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, status.Errorf(codes.FailedPrecondition, "the instance %q does not exist", ns+"/"+vmiName)
		}
		return nil, toStatus(err)
	}
	if err := migratable(vmi); err != nil {
		return nil, err
	}
	if err := s.noActiveMigration(ctx, ns, vmiName); err != nil {
		return nil, err
	}
	// What the API stores: the caller's labels and annotations, plus the
	// label and finalizer every migration carries.
	stored := apiv1.NewMigration(ns, vmiName, "migration", mig.Metadata.GetLabels())
	stored.Metadata.Name, stored.Metadata.Annotations = name, mig.Metadata.GetAnnotations()
	stored.Spec = mig.Spec
	mig = stored
	out, err := s.stores.Migrations.Create(ctx, mig)
	if err != nil {
		return nil, toStatus(err)
	}
	s.log.Info("migration created", "migration", ns+"/"+name, "vmi", vmiName, "node", vmi.GetStatus().GetNodeName(),
		"added_node_selector", mig.GetSpec().GetAddedNodeSelector())
	return out, nil
}

// migratable refuses an instance that cannot migrate now (KubeVirt's
// create admitter and "VM is not running").
func migratable(vmi *apiv1.VirtualMachineInstance) error {
	st := vmi.GetStatus()
	key := vmi.GetMetadata().GetNamespace() + "/" + vmi.GetMetadata().GetName()
	switch {
	case apiv1.IsFinal(st.GetPhase()):
		return status.Errorf(codes.FailedPrecondition, "cannot migrate %s: the instance has ended (%s)", key, st.GetPhase())
	case st.GetPhase() != apiv1.PhaseRunning:
		return status.Errorf(codes.FailedPrecondition, "cannot migrate %s: it is not running (phase %q)", key, st.GetPhase())
	}
	if c := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionLiveMigratable); c.GetStatus() == apiv1.ConditionFalse {
		return status.Errorf(codes.FailedPrecondition, "cannot migrate %s: %s: %s", key, c.GetReason(), c.GetMessage())
	}
	if c := apiv1.LiveMigratable(vmi.GetSpec()); c.GetStatus() == apiv1.ConditionFalse {
		return status.Errorf(codes.FailedPrecondition, "cannot migrate %s: %s: %s", key, c.GetReason(), c.GetMessage())
	}
	return nil
}

// noActiveMigration refuses a second migration of an instance while one
// has not ended ("in-flight migration detected").
func (s *Server) noActiveMigration(ctx context.Context, ns, vmi string) error {
	migs, _, err := s.stores.Migrations.List(ctx, store.ListOptions{Namespace: ns, LabelSelector: apiv1.LabelMigrationVMIName + "=" + vmi})
	if err != nil {
		return toStatus(err)
	}
	for _, o := range migs {
		if !apiv1.IsMigrationFinal(o.GetStatus().GetPhase()) {
			return status.Errorf(codes.FailedPrecondition, "migration %s is already in progress for instance %s (phase %s)",
				o.GetMetadata().GetName(), vmi, phaseOrNew(o.GetStatus().GetPhase()))
		}
	}
	return nil
}

func phaseOrNew(p string) string {
	if p == "" {
		return "new"
	}
	return p
}

func (m *migrationService) Get(ctx context.Context, req *apiv1.GetMigrationRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	return m.get(ctx, req.GetKey())
}

func (m *migrationService) List(ctx context.Context, req *apiv1.ListMigrationsRequest) (*apiv1.ListMigrationsResponse, error) {
	return m.list(ctx, req.GetOptions())
}

func (m *migrationService) Watch(req *apiv1.WatchMigrationsRequest, stream apiv1.Migrations_WatchServer) error {
	return m.watch(req.GetOptions(), stream)
}

// Delete cancels: the finalizer keeps the object until the controller
// recorded how it ended.
func (m *migrationService) Delete(ctx context.Context, req *apiv1.DeleteMigrationRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return nil, err
	}
	out, _, err := m.st.Delete(ctx, ns, name, store.DeleteOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	m.log.Info("migration deletion requested", "migration", ns+"/"+name, "phase", out.GetStatus().GetPhase())
	return out, nil
}

// migrateVM is VMs.Migrate: KubeVirt's `virtctl migrate`, a migration of
// the VM's instance named after it.
func (s *Server) migrateVM(ctx context.Context, req *apiv1.MigrateVirtualMachineRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return nil, err
	}
	if _, err := s.stores.VMs.Get(ctx, ns, name); err != nil {
		return nil, toStatus(err)
	}
	vmi, err := s.stores.VMIs.Get(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, status.Errorf(codes.FailedPrecondition, "VM %s is not running", ns+"/"+name)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if vmi.GetStatus().GetPhase() != apiv1.PhaseRunning {
		return nil, status.Errorf(codes.FailedPrecondition, "VM %s is not running (its instance is %s)", ns+"/"+name, phaseOrNew(vmi.GetStatus().GetPhase()))
	}
	return s.createMigration(ctx, &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: ns},
		Spec:     &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: name, AddedNodeSelector: req.GetAddedNodeSelector()},
	})
}
