package apiserver

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// TargetReader reads what a backup target holds: the server's answer to
// ListManifests. The composition root gives the one over the backup
// repository (package backup/target); errors never carry the target's
// keys.
type TargetReader interface {
	ListManifests(ctx context.Context, t *apiv1.BackupTarget, vmName string) ([]*apiv1.BackupManifestInfo, error)
}

// backupTargetService serves BackupTargets. An S3 target's secret key is
// write-only (secretObjects, as a storage class's key): it leaves the
// server only through Connect, to a node acting for a backup or restore
// of its own that the target selects.
type backupTargetService struct {
	apiv1.UnimplementedBackupTargetsServer
	s       *Server
	targets secretObjects[*apiv1.BackupTarget]
}

func newBackupTargetService(s *Server) apiv1.BackupTargetsServer {
	return &backupTargetService{s: s, targets: secretObjects[*apiv1.BackupTarget]{
		st: s.stores.BackupTargets, s: s, log: s.log, kind: apiv1.KindBackupTarget, noun: "backup target", attr: "target",
		secret: func(t *apiv1.BackupTarget) *string {
			if s3 := t.GetSpec().GetS3(); s3 != nil {
				return &s3.SecretKey
			}
			return nil
		},
		setKeySet: func(t *apiv1.BackupTarget, set bool) {
			if t.Status == nil {
				t.Status = &apiv1.BackupTargetStatus{}
			}
			t.Status.KeySet = set
		},
		newStatus:      func(t *apiv1.BackupTarget) { t.Status = &apiv1.BackupTargetStatus{} },
		specKind:       targetKindName,
		validate:       validation.ValidateBackupTarget,
		validateUpdate: validation.ValidateBackupTargetUpdate,
	}}
}

func (c *backupTargetService) Create(ctx context.Context, req *apiv1.CreateBackupTargetRequest) (*apiv1.BackupTarget, error) {
	return c.targets.create(ctx, req.GetBackupTarget())
}

func targetKindName(t *apiv1.BackupTarget) string {
	if t.GetSpec().GetS3() != nil {
		return "s3"
	}
	return "directory"
}

func (c *backupTargetService) Get(ctx context.Context, req *apiv1.GetBackupTargetRequest) (*apiv1.BackupTarget, error) {
	return c.targets.get(ctx, req.GetName())
}

func (c *backupTargetService) List(ctx context.Context, req *apiv1.ListBackupTargetsRequest) (*apiv1.ListBackupTargetsResponse, error) {
	items, rev, err := c.targets.list(ctx, req.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListBackupTargetsResponse{Items: items, ResourceVersion: rev}, nil
}

// Update replaces labels, annotations and the spec; an empty secret key
// keeps the stored one. Where the data is (kind, path, endpoint, bucket,
// prefix) is immutable.
func (c *backupTargetService) Update(ctx context.Context, req *apiv1.UpdateBackupTargetRequest) (*apiv1.BackupTarget, error) {
	return c.targets.update(ctx, req.GetBackupTarget(), func(n, in *apiv1.BackupTarget) bool { return replaceSpec(&n.Spec, in.Spec) })
}

// Delete refuses while a backup, schedule or restore names the target:
// their data is there (backups deleted with policy Delete must delete
// their manifests through it).
func (c *backupTargetService) Delete(ctx context.Context, req *apiv1.DeleteBackupTargetRequest) (*apiv1.BackupTarget, error) {
	return c.targets.delete(ctx, req.GetName(), c.s.backupTargetUsers,
		"delete them first (a backup with deletion_policy Retain keeps its data in the target)")
}

func (c *backupTargetService) Watch(req *apiv1.WatchBackupTargetsRequest, stream apiv1.BackupTargets_WatchServer) error {
	return c.targets.watch(stream.Context(), req.GetOptions(), func(t apiv1.EventType, obj *apiv1.BackupTarget, rev int64) error {
		return stream.Send(&apiv1.BackupTargetEvent{Type: t, Object: obj, ResourceVersion: rev})
	})
}

// Connect hands a target with its secret key to a node that uploads a
// backup or writes a restore of its own (labelled with the node by the
// controllers, in progress, naming this target), when the target selects
// the node. Admins may call it too: they wrote the key.
func (c *backupTargetService) Connect(ctx context.Context, req *apiv1.ConnectBackupTargetRequest) (*apiv1.BackupTargetConnection, error) {
	name := req.GetName()
	t, err := c.targets.connect(ctx, name, func(node string) error { return c.s.nodeActsFor(ctx, node, name, req) })
	if err != nil {
		return nil, err
	}
	return &apiv1.BackupTargetConnection{BackupTarget: t}, nil
}

// ListManifests answers from the target's manifests, read by the server.
func (c *backupTargetService) ListManifests(ctx context.Context, req *apiv1.ListBackupManifestsRequest) (*apiv1.ListBackupManifestsResponse, error) {
	if _, err := c.targets.store(); err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := c.targets.checkName(name); err != nil {
		return nil, err
	}
	if vm := req.GetVmName(); vm != "" {
		if err := validation.ToStatusError("ListBackupManifestsRequest", vm, validation.ValidateObjectKey(apiv1.DefaultNamespace, vm, field.NewPath("vm_name"))); err != nil {
			return nil, err
		}
	}
	if c.s.opts.BackupTargets == nil {
		return nil, status.Error(codes.Unimplemented, "this server reads no backup targets")
	}
	t, err := c.targets.getWithSecret(ctx, name) // the reader needs the key
	if err != nil {
		return nil, err
	}
	items, err := c.s.opts.BackupTargets.ListManifests(ctx, t, req.GetVmName())
	if err != nil {
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
			return nil, err
		}
		return nil, status.Errorf(codes.Unavailable, "reading backup target %q: %v", name, err)
	}
	return &apiv1.ListBackupManifestsResponse{Items: items}, nil
}

// nodeActsFor checks that node is the node of the backup or backup
// restore req names, which is in progress and names target: the one case
// a node may have a target's secret key.
func (s *Server) nodeActsFor(ctx context.Context, node, target string, req *apiv1.ConnectBackupTargetRequest) error {
	b, r := req.GetBackup(), req.GetBackupRestore()
	if (b == nil) == (r == nil) {
		return status.Error(codes.InvalidArgument, "backup, backup_restore: a node names exactly one: the backup or the restore it acts for")
	}
	var md *apiv1.ObjectMeta
	var gotTarget, phase, kind string
	switch {
	case b != nil:
		if s.stores.Backups == nil {
			return status.Error(codes.Unimplemented, "this server serves no backups")
		}
		ns, n, err := keyOf(b)
		if err != nil {
			return err
		}
		obj, err := s.stores.Backups.Get(ctx, ns, n)
		if err != nil {
			return toStatus(err)
		}
		md, gotTarget, phase, kind = obj.GetMetadata(), obj.GetSpec().GetTarget(), obj.GetStatus().GetPhase(), apiv1.KindBackup
	default:
		if s.stores.BackupRestores == nil {
			return status.Error(codes.Unimplemented, "this server serves no backup restores")
		}
		ns, n, err := keyOf(r)
		if err != nil {
			return err
		}
		obj, err := s.stores.BackupRestores.Get(ctx, ns, n)
		if err != nil {
			return toStatus(err)
		}
		md, gotTarget, phase, kind = obj.GetMetadata(), obj.GetSpec().GetTarget(), obj.GetStatus().GetPhase(), apiv1.KindBackupRestore
	}
	ref := apiv1.Ref(md.GetNamespace(), md.GetName())
	switch {
	case md.GetLabels()[apiv1.LabelNodeName] != node:
		return status.Errorf(codes.PermissionDenied, "%s %q is not labelled %s=%s: node %s may connect only for its own", kind, ref, apiv1.LabelNodeName, node, node)
	case gotTarget != target:
		return status.Errorf(codes.PermissionDenied, "%s %q names backup target %q, not %q", kind, ref, gotTarget, target)
	case phase != apiv1.BackupInProgress:
		return status.Errorf(codes.FailedPrecondition, "%s %q is %s, not InProgress: nothing to transfer", kind, ref, phaseOrNone(phase))
	}
	return nil
}

// phaseOrNone names an object's phase in an error, an empty one too.
func phaseOrNone(p string) string {
	if p == "" {
		return "(no phase)"
	}
	return p
}

// backupTargetUsers lists the backups, schedules and restores (not
// being deleted) that name target.
func (s *Server) backupTargetUsers(ctx context.Context, target string) ([]string, error) {
	var users []string
	add := func(kind string, md *apiv1.ObjectMeta, t string) {
		if t == target {
			users = append(users, kind+" "+apiv1.Ref(md.GetNamespace(), md.GetName()))
		}
	}
	if st := s.stores.Backups; st != nil {
		items, _, err := st.List(ctx, store.ListOptions{})
		if err != nil {
			return nil, toStatus(err)
		}
		for _, b := range items {
			add("backup", b.GetMetadata(), b.GetSpec().GetTarget())
		}
	}
	if st := s.stores.BackupSchedules; st != nil {
		items, _, err := st.List(ctx, store.ListOptions{})
		if err != nil {
			return nil, toStatus(err)
		}
		for _, b := range items {
			add("backup schedule", b.GetMetadata(), b.GetSpec().GetTarget())
		}
	}
	if st := s.stores.BackupRestores; st != nil {
		items, _, err := st.List(ctx, store.ListOptions{})
		if err != nil {
			return nil, toStatus(err)
		}
		for _, r := range items {
			add("backup restore", r.GetMetadata(), r.GetSpec().GetTarget())
		}
	}
	return users, nil
}

func joinUsers(users []string) string {
	if len(users) > maxUsersListed {
		users = append(users[:maxUsersListed:maxUsersListed], "…")
	}
	return strings.Join(users, ", ")
}

// checkBackupTarget refuses a backup, schedule or restore naming a
// target that does not exist, naming the field.
func (s *Server) checkBackupTarget(ctx context.Context, kind, ref, name string, path *field.Path) error {
	if s.stores.BackupTargets == nil {
		return status.Error(codes.Unimplemented, "this server serves no backup targets")
	}
	_, err := s.stores.BackupTargets.Get(ctx, "", name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return validation.ToStatusError(kind, ref, field.ErrorList{field.NotFound(path, name)})
	case err != nil:
		return toStatus(err)
	}
	return nil
}
