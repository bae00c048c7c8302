package apiserver

import (
	"context"
	"errors"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The namespaced backup kinds: backups and restores are made by users
// and driven by their controllers, with the node labelled on one writing
// its part of the status; schedules are users' objects the schedule
// controller acts on.

// backupService is the VirtualMachineBackup API.
type backupService struct {
	apiv1.UnimplementedBackupsServer
	objects[*apiv1.VirtualMachineBackup, *apiv1.ListBackupsResponse, apiv1.BackupEvent]
	s *Server
}

func newBackupService(s *Server) apiv1.BackupsServer {
	return &backupService{s: s, objects: objects[*apiv1.VirtualMachineBackup, *apiv1.ListBackupsResponse, apiv1.BackupEvent]{
		st: s.stores.Backups, log: s.log, kind: apiv1.KindBackup, noun: "backup", attr: "backup",
		listResponse: func(p store.Page[*apiv1.VirtualMachineBackup]) *apiv1.ListBackupsResponse {
			return &apiv1.ListBackupsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineBackup, rev int64) *apiv1.BackupEvent {
			return &apiv1.BackupEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

// errNoBackups answers on a server built without the backup stores.
var errNoBackups = status.Error(codes.Unimplemented, "this server serves no backups")

func (v *backupService) Create(ctx context.Context, req *apiv1.CreateBackupRequest) (*apiv1.VirtualMachineBackup, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	b := requestCopy(req.GetBackup())
	validation.DefaultBackup(b)
	if errs := validation.ValidateBackup(b); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindBackup, b.GetMetadata().GetName(), errs)
	}
	ref := apiv1.Ref(b.Metadata.Namespace, b.Metadata.Name)
	if err := v.s.checkBackupTarget(ctx, apiv1.KindBackup, ref, b.Spec.Target, field.NewPath("spec", "target")); err != nil {
		return nil, err
	}
	md := userMeta(b.Metadata)
	// Labels the controller's own (target, VM uid) are not the user's to
	// set: the previous backup of a VM is found by them.
	delete(md.Labels, apiv1.LabelBackupTarget)
	delete(md.Labels, apiv1.LabelBackupVMUID)
	delete(md.Labels, apiv1.LabelNodeName)
	// Retention deletes only the backups its schedule made, with their
	// data: a backup a user makes is never its to delete.
	delete(md.Labels, apiv1.LabelBackupSchedule)
	b.Metadata = md
	b.Status = &apiv1.VirtualMachineBackupStatus{}
	return v.create(ctx, b, "source", b.Spec.Source, "target", b.Spec.Target)
}

func (v *backupService) Get(ctx context.Context, req *apiv1.GetBackupRequest) (*apiv1.VirtualMachineBackup, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.get(ctx, req.GetKey())
}

func (v *backupService) List(ctx context.Context, req *apiv1.ListBackupsRequest) (*apiv1.ListBackupsResponse, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.list(ctx, req.GetOptions())
}

func (v *backupService) UpdateStatus(ctx context.Context, req *apiv1.UpdateBackupStatusRequest) (*apiv1.VirtualMachineBackup, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.updateStatus(ctx, req.GetBackup(), statusRule[*apiv1.VirtualMachineBackup]{
		validate: func(in *apiv1.VirtualMachineBackup) field.ErrorList {
			return validation.ValidateBackupStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus:     func(next, in *apiv1.VirtualMachineBackup) { next.Status = in.GetStatus() },
		nodeStatus:    setNodeBackupStatus,
		dataFinalizer: apiv1.FinalizerBackupUpload,
	})
}

// setNodeBackupStatus takes what the uploading node owns: its phase and
// error, what it does, the volumes, the progress and the manifest id.
// The backup's phase and conditions stay the controller's.
func setNodeBackupStatus(next, in *apiv1.VirtualMachineBackup) {
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachineBackupStatus{}
	}
	st := in.GetStatus()
	next.Status.UploadPhase, next.Status.UploadError, next.Status.Message = st.GetUploadPhase(), st.GetUploadError(), st.GetMessage()
	next.Status.Volumes, next.Status.Progress, next.Status.ManifestId = st.GetVolumes(), st.GetProgress(), st.GetManifestId()
}

func (v *backupService) Delete(ctx context.Context, req *apiv1.DeleteBackupRequest) (*apiv1.VirtualMachineBackup, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *backupService) Watch(req *apiv1.WatchBackupsRequest, stream apiv1.Backups_WatchServer) error {
	if v.st == nil {
		return errNoBackups
	}
	return v.watch(req.GetOptions(), stream)
}

// backupScheduleService is the VirtualMachineBackupSchedule API.
type backupScheduleService struct {
	apiv1.UnimplementedBackupSchedulesServer
	objects[*apiv1.VirtualMachineBackupSchedule, *apiv1.ListBackupSchedulesResponse, apiv1.BackupScheduleEvent]
	s *Server
}

func newBackupScheduleService(s *Server) apiv1.BackupSchedulesServer {
	return &backupScheduleService{s: s, objects: objects[*apiv1.VirtualMachineBackupSchedule, *apiv1.ListBackupSchedulesResponse, apiv1.BackupScheduleEvent]{
		st: s.stores.BackupSchedules, log: s.log, kind: apiv1.KindBackupSchedule, noun: "backup schedule", attr: "schedule",
		listResponse: func(p store.Page[*apiv1.VirtualMachineBackupSchedule]) *apiv1.ListBackupSchedulesResponse {
			return &apiv1.ListBackupSchedulesResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineBackupSchedule, rev int64) *apiv1.BackupScheduleEvent {
			return &apiv1.BackupScheduleEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *backupScheduleService) Create(ctx context.Context, req *apiv1.CreateBackupScheduleRequest) (*apiv1.VirtualMachineBackupSchedule, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	s := requestCopy(req.GetBackupSchedule())
	validation.DefaultBackupSchedule(s)
	if errs := validation.ValidateBackupSchedule(s); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindBackupSchedule, s.GetMetadata().GetName(), errs)
	}
	ref := apiv1.Ref(s.Metadata.Namespace, s.Metadata.Name)
	if err := v.s.checkBackupTarget(ctx, apiv1.KindBackupSchedule, ref, s.Spec.Target, field.NewPath("spec", "target")); err != nil {
		return nil, err
	}
	s.Metadata = userMeta(s.Metadata)
	s.Status = &apiv1.VirtualMachineBackupScheduleStatus{}
	return v.create(ctx, s, "source", s.Spec.Source, "target", s.Spec.Target, "schedule", s.Spec.Schedule)
}

func (v *backupScheduleService) Get(ctx context.Context, req *apiv1.GetBackupScheduleRequest) (*apiv1.VirtualMachineBackupSchedule, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.get(ctx, req.GetKey())
}

func (v *backupScheduleService) List(ctx context.Context, req *apiv1.ListBackupSchedulesRequest) (*apiv1.ListBackupSchedulesResponse, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.list(ctx, req.GetOptions())
}

// Update replaces the schedule, retention, suspend, labels and
// annotations; the source and target are immutable.
func (v *backupScheduleService) Update(ctx context.Context, req *apiv1.UpdateBackupScheduleRequest) (*apiv1.VirtualMachineBackupSchedule, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	in := requestCopy(req.GetBackupSchedule())
	validation.DefaultBackupSchedule(in)
	return v.update(ctx, in, func(in, old *apiv1.VirtualMachineBackupSchedule) error {
		errs := validation.ValidateBackupSchedule(in)
		errs = append(errs, validation.ValidateBackupScheduleUpdate(in, old)...)
		return validation.ToStatusError(apiv1.KindBackupSchedule, in.GetMetadata().GetName(), errs)
	}, func(next, in *apiv1.VirtualMachineBackupSchedule) bool { return replaceSpec(&next.Spec, in.Spec) })
}

func (v *backupScheduleService) Delete(ctx context.Context, req *apiv1.DeleteBackupScheduleRequest) (*apiv1.VirtualMachineBackupSchedule, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *backupScheduleService) Watch(req *apiv1.WatchBackupSchedulesRequest, stream apiv1.BackupSchedules_WatchServer) error {
	if v.st == nil {
		return errNoBackups
	}
	return v.watch(req.GetOptions(), stream)
}

// backupRestoreService is the VirtualMachineBackupRestore API.
type backupRestoreService struct {
	apiv1.UnimplementedBackupRestoresServer
	objects[*apiv1.VirtualMachineBackupRestore, *apiv1.ListBackupRestoresResponse, apiv1.BackupRestoreEvent]
	s *Server
}

func newBackupRestoreService(s *Server) apiv1.BackupRestoresServer {
	return &backupRestoreService{s: s, objects: objects[*apiv1.VirtualMachineBackupRestore, *apiv1.ListBackupRestoresResponse, apiv1.BackupRestoreEvent]{
		st: s.stores.BackupRestores, log: s.log, kind: apiv1.KindBackupRestore, noun: "backup restore", attr: "restore",
		listResponse: func(p store.Page[*apiv1.VirtualMachineBackupRestore]) *apiv1.ListBackupRestoresResponse {
			return &apiv1.ListBackupRestoresResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineBackupRestore, rev int64) *apiv1.BackupRestoreEvent {
			return &apiv1.BackupRestoreEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *backupRestoreService) Create(ctx context.Context, req *apiv1.CreateBackupRestoreRequest) (*apiv1.VirtualMachineBackupRestore, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	r := requestCopy(req.GetBackupRestore())
	validation.DefaultBackupRestore(r)
	if errs := validation.ValidateBackupRestore(r); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindBackupRestore, r.GetMetadata().GetName(), errs)
	}
	ref := apiv1.Ref(r.Metadata.Namespace, r.Metadata.Name)
	if err := v.s.checkBackupTarget(ctx, apiv1.KindBackupRestore, ref, r.Spec.Target, field.NewPath("spec", "target")); err != nil {
		return nil, err
	}
	// The restore makes a new VM: refused at once when the name is
	// taken. One made under that name later fails the restore.
	_, err := v.s.stores.VMs.Get(ctx, r.Metadata.Namespace, r.Spec.VmName)
	switch {
	case err == nil:
		return nil, status.Errorf(codes.FailedPrecondition, "spec.vm_name: VM %q already exists: a backup is restored into a new VM", r.Spec.VmName)
	case !errors.Is(err, store.ErrNotFound):
		return nil, toStatus(err)
	}
	if n := r.Spec.NodeName; n != "" {
		if _, err := v.s.stores.Nodes.Get(ctx, "", n); errors.Is(err, store.ErrNotFound) {
			return nil, validation.ToStatusError(apiv1.KindBackupRestore, ref, field.ErrorList{field.NotFound(field.NewPath("spec", "node_name"), n)})
		} else if err != nil {
			return nil, toStatus(err)
		}
	}
	r.Metadata = userMeta(r.Metadata)
	delete(r.Metadata.Labels, apiv1.LabelNodeName)
	// Only a cluster-admin's restore may take a backup of another
	// namespace; the annotation that says so is the server's.
	r.Metadata.Annotations = maps.Clone(r.Metadata.Annotations)
	delete(r.Metadata.Annotations, apiv1.AnnotationAnyNamespaceRestore)
	if v.s.clusterAdmin(IdentityFrom(ctx)) {
		if r.Metadata.Annotations == nil {
			r.Metadata.Annotations = map[string]string{}
		}
		r.Metadata.Annotations[apiv1.AnnotationAnyNamespaceRestore] = "true"
	}
	r.Status = &apiv1.VirtualMachineBackupRestoreStatus{}
	return v.create(ctx, r, "target", r.Spec.Target, "backup_id", r.Spec.BackupId, "vm", r.Spec.VmName)
}

func (v *backupRestoreService) Get(ctx context.Context, req *apiv1.GetBackupRestoreRequest) (*apiv1.VirtualMachineBackupRestore, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.get(ctx, req.GetKey())
}

func (v *backupRestoreService) List(ctx context.Context, req *apiv1.ListBackupRestoresRequest) (*apiv1.ListBackupRestoresResponse, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.list(ctx, req.GetOptions())
}

func (v *backupRestoreService) UpdateStatus(ctx context.Context, req *apiv1.UpdateBackupRestoreStatusRequest) (*apiv1.VirtualMachineBackupRestore, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.updateStatus(ctx, req.GetBackupRestore(), statusRule[*apiv1.VirtualMachineBackupRestore]{
		validate: func(in *apiv1.VirtualMachineBackupRestore) field.ErrorList {
			return validation.ValidateBackupRestoreStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus:     func(next, in *apiv1.VirtualMachineBackupRestore) { next.Status = in.GetStatus() },
		nodeStatus:    setNodeBackupRestoreStatus,
		dataFinalizer: apiv1.FinalizerBackupRestoreData,
	})
}

// setNodeBackupRestoreStatus takes what the writing node owns.
func setNodeBackupRestoreStatus(next, in *apiv1.VirtualMachineBackupRestore) {
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachineBackupRestoreStatus{}
	}
	st := in.GetStatus()
	next.Status.WritePhase, next.Status.WriteError, next.Status.Message = st.GetWritePhase(), st.GetWriteError(), st.GetMessage()
	next.Status.Volumes, next.Status.Progress = st.GetVolumes(), st.GetProgress()
}

func (v *backupRestoreService) Delete(ctx context.Context, req *apiv1.DeleteBackupRestoreRequest) (*apiv1.VirtualMachineBackupRestore, error) {
	if v.st == nil {
		return nil, errNoBackups
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *backupRestoreService) Watch(req *apiv1.WatchBackupRestoresRequest, stream apiv1.BackupRestores_WatchServer) error {
	if v.st == nil {
		return errNoBackups
	}
	return v.watch(req.GetOptions(), stream)
}
