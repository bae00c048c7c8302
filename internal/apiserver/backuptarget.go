package apiserver

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
// stored with it and leaves the server only through Connect, to a node
// acting for a backup or restore of its own: every other read carries
// status.key_set instead (as a storage class's key).
type backupTargetService struct {
	apiv1.UnimplementedBackupTargetsServer
	s *Server
}

func newBackupTargetService(s *Server) apiv1.BackupTargetsServer {
	return &backupTargetService{s: s}
}

// withoutSecret is t as readers see it: no secret key, key_set saying
// whether one is stored.
func withoutSecret(t *apiv1.BackupTarget) *apiv1.BackupTarget {
	if t == nil {
		return nil
	}
	out := proto.Clone(t).(*apiv1.BackupTarget)
	if out.Status == nil {
		out.Status = &apiv1.BackupTargetStatus{}
	}
	out.Status.KeySet = out.GetSpec().GetS3().GetSecretKey() != ""
	if s3 := out.GetSpec().GetS3(); s3 != nil {
		s3.SecretKey = ""
	}
	return out
}

func (c *backupTargetService) store() (store.Store[*apiv1.BackupTarget], error) {
	if c.s.stores.BackupTargets == nil {
		return nil, status.Error(codes.Unimplemented, "this server serves no backup targets")
	}
	return c.s.stores.BackupTargets, nil
}

func checkTargetName(name string) error {
	errs := validation.ValidateObjectMeta(&apiv1.ObjectMeta{Name: name}, false, field.NewPath("name"))
	return validation.ToStatusError(apiv1.KindBackupTarget, name, errs)
}

func (c *backupTargetService) Create(ctx context.Context, req *apiv1.CreateBackupTargetRequest) (*apiv1.BackupTarget, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	t := requestCopy(req.GetBackupTarget())
	validation.DiscardUnknown(t)
	if errs := validation.ValidateBackupTarget(t, true); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindBackupTarget, t.GetMetadata().GetName(), errs)
	}
	m := t.Metadata
	t.Metadata = &apiv1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
	t.Status = &apiv1.BackupTargetStatus{}
	out, err := st.Create(ctx, t)
	if err != nil {
		return nil, toStatus(err)
	}
	c.s.log.Info("backup target created", "target", m.Name, "kind", targetKindName(t))
	return withoutSecret(out), nil
}

func targetKindName(t *apiv1.BackupTarget) string {
	if t.GetSpec().GetS3() != nil {
		return "s3"
	}
	return "directory"
}

func (c *backupTargetService) Get(ctx context.Context, req *apiv1.GetBackupTargetRequest) (*apiv1.BackupTarget, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	if err := checkTargetName(req.GetName()); err != nil {
		return nil, err
	}
	out, err := st.Get(ctx, "", req.GetName())
	return withoutSecret(out), toStatus(err)
}

func (c *backupTargetService) List(ctx context.Context, req *apiv1.ListBackupTargetsRequest) (*apiv1.ListBackupTargetsResponse, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	if err := checkSelector(req.GetLabelSelector()); err != nil {
		return nil, err
	}
	items, rev, err := st.List(ctx, store.ListOptions{LabelSelector: req.GetLabelSelector()})
	if err != nil {
		return nil, toStatus(err)
	}
	for i, t := range items {
		items[i] = withoutSecret(t)
	}
	return &apiv1.ListBackupTargetsResponse{Items: items, ResourceVersion: rev}, nil
}

// Update replaces labels, annotations and the spec; an empty secret key
// keeps the stored one. Where the data is (kind, path, endpoint, bucket,
// prefix) is immutable.
func (c *backupTargetService) Update(ctx context.Context, req *apiv1.UpdateBackupTargetRequest) (*apiv1.BackupTarget, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	in := requestCopy(req.GetBackupTarget())
	validation.DiscardUnknown(in)
	if in.GetMetadata().GetResourceVersion() == 0 {
		return nil, errNoResourceVersion
	}
	if errs := validation.ValidateBackupTarget(in, false); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindBackupTarget, in.GetMetadata().GetName(), errs)
	}
	old, err := st.Get(ctx, "", in.Metadata.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if s3 := in.GetSpec().GetS3(); s3 != nil && s3.SecretKey == "" {
		s3.SecretKey = old.GetSpec().GetS3().GetSecretKey()
	}
	if errs := validation.ValidateBackupTargetUpdate(in, old); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindBackupTarget, in.Metadata.Name, errs)
	}
	if stale(old, in.Metadata) {
		return nil, conflict(apiv1.KindBackupTarget, in.Metadata.Name)
	}
	next, changed := withUserChanges(old, in, func(n *apiv1.BackupTarget) bool { return replaceSpec(&n.Spec, in.Spec) })
	if !changed {
		return withoutSecret(old), nil
	}
	out, err := st.Update(ctx, next)
	if err == nil {
		c.s.log.Info("backup target updated", "target", in.Metadata.Name)
	}
	return withoutSecret(out), toStatus(err)
}

// Delete refuses while a backup, schedule or restore names the target:
// their data is there (backups deleted with policy Delete must delete
// their manifests through it).
func (c *backupTargetService) Delete(ctx context.Context, req *apiv1.DeleteBackupTargetRequest) (*apiv1.BackupTarget, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := checkTargetName(name); err != nil {
		return nil, err
	}
	users, err := c.s.backupTargetUsers(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(users) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "backup target %q is in use by %s: delete them first (a backup with deletion_policy Retain keeps its data in the target)", name, joinUsers(users))
	}
	out, _, err := st.Delete(ctx, "", name, store.DeleteOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	c.s.log.Info("backup target deleted", "target", name)
	return withoutSecret(out), nil
}

func (c *backupTargetService) Watch(req *apiv1.WatchBackupTargetsRequest, stream apiv1.BackupTargets_WatchServer) error {
	st, err := c.store()
	if err != nil {
		return err
	}
	return clusterWatch(stream.Context(), st, req.GetOptions(), func(t apiv1.EventType, obj *apiv1.BackupTarget, rev int64) error {
		return stream.Send(&apiv1.BackupTargetEvent{Type: t, Object: withoutSecret(obj), ResourceVersion: rev})
	})
}

// Connect hands a target with its secret key to a node that uploads a
// backup or writes a restore of its own (labelled with the node by the
// controllers, in progress, naming this target), when the target selects
// the node. Admins may call it too: they wrote the key.
func (c *backupTargetService) Connect(ctx context.Context, req *apiv1.ConnectBackupTargetRequest) (*apiv1.BackupTargetConnection, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := checkTargetName(name); err != nil {
		return nil, err
	}
	if id := IdentityFrom(ctx); id.Kind == Node {
		if err := c.s.nodeActsFor(ctx, id.Node, name, req); err != nil {
			return nil, err
		}
	}
	t, err := st.Get(ctx, "", name)
	if err != nil {
		return nil, toStatus(err)
	}
	if id := IdentityFrom(ctx); id.Kind == Node {
		node, err := c.s.stores.Nodes.Get(ctx, "", id.Node)
		if err != nil {
			return nil, toStatus(err)
		}
		if !t.SelectsNode(node.GetMetadata().GetLabels()) {
			return nil, status.Errorf(codes.PermissionDenied, "backup target %q does not select node %s (spec.node_selector)", name, id.Node)
		}
	}
	return &apiv1.BackupTargetConnection{BackupTarget: t}, nil
}

// ListManifests answers from the target's manifests, read by the server.
func (c *backupTargetService) ListManifests(ctx context.Context, req *apiv1.ListBackupManifestsRequest) (*apiv1.ListBackupManifestsResponse, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := checkTargetName(name); err != nil {
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
	t, err := st.Get(ctx, "", name)
	if err != nil {
		return nil, toStatus(err)
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
