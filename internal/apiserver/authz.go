package apiserver

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Authorization, per method (docs/security.md has the table):
//   - admins (and cluster-admin users) may call everything;
//   - anonymous callers only Bootstrap.Join (the token in it authenticates);
//   - users and service accounts what methodRules (authz_table.go) and
//     their role bindings (roles.go) allow;
//   - nodes only the methods in nodeRules, each checked to act for the
//     calling node alone, as Kubernetes' node authorizer and
//     NodeRestriction hold a kubelet to its own Node and its pods, and
//     Auth (who am I), as every caller.
//
// Every method of the API has an entry in methodRules; a test keeps it
// so, so a new method is never open by omission.
//
// The table is applied in two places: whether an identity may call a
// method at all (authorize) is decided in the tap handle, before grpc
// reads the request, so a refused call costs no body read or decode; a
// node rule's checks of the request and the response (before, after),
// and a user's namespace, which need them decoded, run in the
// interceptors below.

// nodeRule checks a node's call: before sees the request (a stream's
// first message), after may refuse or trim the response.
type nodeRule struct {
	before func(node string, req any) error
	after  func(node string, resp any) (any, error)
}

var nodeRules = map[string]nodeRule{
	// A VM's name and uid tell a node whether the VM its files belong to
	// still exists; the spec only when the VM last ran on that node.
	apiv1.VirtualMachines_Get_FullMethodName: {after: func(node string, resp any) (any, error) {
		vm := resp.(*apiv1.VirtualMachine)
		if vm.GetStatus().GetNodeName() == node {
			return vm, nil
		}
		md := vm.GetMetadata()
		return &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{
			Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid(), ResourceVersion: md.GetResourceVersion(),
		}}, nil
	}},
	apiv1.VirtualMachineInstances_Get_FullMethodName: {after: func(node string, resp any) (any, error) {
		if vmi := resp.(*apiv1.VirtualMachineInstance); !onNode(vmi, node) {
			return nil, status.Errorf(codes.PermissionDenied, "node %s may read only its own instances", node)
		}
		return resp, nil
	}},
	apiv1.VirtualMachineInstances_List_FullMethodName: {before: func(node string, req any) error {
		return ownNodeSelector(node, req.(*apiv1.ListVirtualMachineInstancesRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.VirtualMachineInstances_Watch_FullMethodName: {before: func(node string, req any) error {
		return ownNodeSelector(node, req.(*apiv1.WatchVirtualMachineInstancesRequest).GetOptions().GetLabelSelector())
	}},
	// The handler checks that the instance is the node's (vmi.go).
	apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName: {},
	apiv1.Nodes_Get_FullMethodName: {before: func(node string, req any) error {
		return sameNode(node, "name", req.(*apiv1.GetNodeRequest).GetName())
	}},
	apiv1.Nodes_Register_FullMethodName: {before: func(node string, req any) error {
		return sameNode(node, "node.metadata.name", req.(*apiv1.RegisterNodeRequest).GetNode().GetMetadata().GetName())
	}},
	apiv1.Nodes_Heartbeat_FullMethodName: {before: func(node string, req any) error {
		return sameNode(node, "name", req.(*apiv1.HeartbeatRequest).GetName())
	}},
	apiv1.Consoles_Sessions_FullMethodName: {before: func(node string, req any) error {
		return sameNode(node, "node_name", req.(*apiv1.ConsoleSessionsRequest).GetNodeName())
	}},
	// The handler checks that the session was handed to this node.
	apiv1.Consoles_Serve_FullMethodName: {},
	// The handler renews the calling node's own certificate.
	apiv1.Bootstrap_Renew_FullMethodName: {},
	// Images are cluster-wide and hold no secrets (URLs with credentials
	// are refused): every node pulls by them.
	apiv1.Images_Get_FullMethodName:   {},
	apiv1.Images_List_FullMethodName:  {},
	apiv1.Images_Watch_FullMethodName: {},
	// The handler checks that the node reports its own pull.
	apiv1.Images_UpdateNodeStatus_FullMethodName: {},
	// An uploaded image's data, as its Image, is for every node to pull.
	apiv1.ImageUploads_Download_FullMethodName: {},
	// Storage classes say where volumes are; reads never carry the key
	// (storageclass.go). Connect gives it to the nodes a class selects
	// (the handler checks the node's labels).
	apiv1.StorageClasses_Get_FullMethodName:     {},
	apiv1.StorageClasses_List_FullMethodName:    {},
	apiv1.StorageClasses_Watch_FullMethodName:   {},
	apiv1.StorageClasses_Connect_FullMethodName: {},
	// Snapshot contents and restores name the node that holds their data
	// (virtplane.io/node-name, set by their controllers): that node copies,
	// stages and removes the data, and sees no other node's.
	apiv1.SnapshotContents_Get_FullMethodName: {after: labelledForNode(apiv1.KindSnapshotContent)},
	apiv1.SnapshotContents_List_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.ListSnapshotContentsRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.SnapshotContents_Watch_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.WatchSnapshotContentsRequest).GetOptions().GetLabelSelector())
	}},
	// The handler checks the stored object's label (status.go, statusRule).
	apiv1.SnapshotContents_UpdateStatus_FullMethodName: {},
	apiv1.Restores_Get_FullMethodName:                  {after: labelledForNode(apiv1.KindRestore)},
	// An export names the node that serves it (virtplane.io/node-name,
	// set by the export controller): that node reads its token hash and
	// serves it, and sees no other node's.
	apiv1.Exports_Get_FullMethodName: {after: labelledForNode(apiv1.KindExport)},
	apiv1.Exports_List_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.ListExportsRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Exports_Watch_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.WatchExportsRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Restores_List_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.ListRestoresRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Restores_Watch_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.WatchRestoresRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Restores_UpdateStatus_FullMethodName: {},
	// Backup targets say where backups go; reads never carry the secret
	// key (backuptarget.go). Connect gives it to the node of a backup or
	// backup restore in progress that names the target (the handler
	// checks the object's node label and the target's node selector).
	apiv1.BackupTargets_Get_FullMethodName:     {},
	apiv1.BackupTargets_List_FullMethodName:    {},
	apiv1.BackupTargets_Watch_FullMethodName:   {},
	apiv1.BackupTargets_Connect_FullMethodName: {},
	// Backups and backup restores name the node that uploads or writes
	// their data (virtplane.io/node-name, set by their controllers).
	apiv1.Backups_Get_FullMethodName: {after: labelledForNode(apiv1.KindBackup)},
	apiv1.Backups_List_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.ListBackupsRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Backups_Watch_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.WatchBackupsRequest).GetOptions().GetLabelSelector())
	}},
	// The handler checks the stored object's label (status.go, statusRule).
	apiv1.Backups_UpdateStatus_FullMethodName: {},
	apiv1.BackupRestores_Get_FullMethodName:   {after: labelledForNode(apiv1.KindBackupRestore)},
	apiv1.BackupRestores_List_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.ListBackupRestoresRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.BackupRestores_Watch_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.WatchBackupRestoresRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.BackupRestores_UpdateStatus_FullMethodName: {},
	// An adoption names the node that has the domain (virtplane.io/node-name,
	// set by the server from its spec): that node maps the domain and
	// takes it over, and sees no other node's adoptions. The handler
	// checks the label and which fields a node may write (adoption.go).
	apiv1.Adoptions_Get_FullMethodName: {after: labelledForNode(apiv1.KindAdoption)},
	apiv1.Adoptions_List_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.ListAdoptionsRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Adoptions_Watch_FullMethodName: {before: func(node string, req any) error {
		return nodeNameSelector(node, req.(*apiv1.WatchAdoptionsRequest).GetOptions().GetLabelSelector())
	}},
	apiv1.Adoptions_UpdateStatus_FullMethodName: {},
}

// methodSet is the set of the full method names in group and more.
func methodSet(group []string, more ...string) map[string]bool {
	set := make(map[string]bool, len(group)+len(more))
	for _, m := range group {
		set[m] = true
	}
	for _, m := range more {
		set[m] = true
	}
	return set
}

// onNode reports whether node may read vmi: it runs there, or is on its
// way there (a migration's target).
func onNode(vmi *apiv1.VirtualMachineInstance, node string) bool {
	return vmi.GetStatus().GetNodeName() == node || vmi.GetMetadata().GetLabels()[apiv1.LabelNodeName] == node ||
		migrationTarget(vmi, node)
}

// migrationTarget reports whether node is the target of vmi's migration.
func migrationTarget(vmi *apiv1.VirtualMachineInstance, node string) bool {
	return vmi.GetMetadata().GetLabels()[apiv1.LabelMigrationTargetNode] == node &&
		vmi.GetStatus().GetMigrationState().GetTargetNode() == node
}

func sameNode(node, field, got string) error {
	if got != node {
		return status.Errorf(codes.PermissionDenied, "%s: node %s may act only for itself, not for %q", field, node, got)
	}
	return nil
}

// ownNodeSelector requires a node's instance list or watch to select its
// own instances: the selector must hold virtplane.io/node-name=<node>, or
// virtplane.io/migration-target-node=<node> for those migrating to it.
func ownNodeSelector(node, selector string) error {
	return pinsNode(node, selector, status.Errorf(codes.PermissionDenied,
		"options.label_selector: node %s may list only its own instances (%s=%s) or those migrating to it (%s=%s)",
		node, apiv1.LabelNodeName, node, apiv1.LabelMigrationTargetNode, node),
		apiv1.LabelNodeName, apiv1.LabelMigrationTargetNode)
}

// nodeNameSelector requires a node's list or watch of snapshot contents or
// restores to select those of its own node: virtplane.io/node-name=<node>.
func nodeNameSelector(node, selector string) error {
	return pinsNode(node, selector, status.Errorf(codes.PermissionDenied,
		"options.label_selector: node %s may list only the objects of its own node (%s=%s)", node, apiv1.LabelNodeName, node),
		apiv1.LabelNodeName)
}

// labelledForNode lets a node read an object of kind only when it is
// labelled with that node (virtplane.io/node-name).
func labelledForNode(kind string) func(node string, resp any) (any, error) {
	return func(node string, resp any) (any, error) {
		if resp.(interface{ GetMetadata() *apiv1.ObjectMeta }).GetMetadata().GetLabels()[apiv1.LabelNodeName] != node {
			return nil, status.Errorf(codes.PermissionDenied, "node %s may read only the %ss of its own node", node, kind)
		}
		return resp, nil
	}
}

// pinsNode is nil when selector holds key=<node> (or key in (<node>)) for
// one of keys, and deny otherwise: then every object it selects carries
// that label with the node's name.
func pinsNode(node, selector string, deny error, keys ...string) error {
	sel, err := labels.Parse(selector)
	if err != nil {
		return deny
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if !slices.Contains(keys, r.Key()) {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if v := r.Values(); v.Len() == 1 && v.Has(node) {
				return nil
			}
		}
	}
	return deny
}

// authorize decides whether id may call method at all, from the method
// alone: the tap handle calls it before the request is read, so a call
// no role of the caller could allow costs no body read. The interceptors
// call it again (a server built without the tap refuses as well) and
// then decide with the decoded request (authorizeRequest).
func (s *Server) authorize(ctx context.Context, id Identity, method string) (nodeRule, error) {
	switch id.Kind {
	case Admin:
		return nodeRule{}, nil
	case Anonymous:
		if method == apiv1.Bootstrap_Join_FullMethodName {
			return nodeRule{}, nil
		}
		return nodeRule{}, status.Error(codes.Unauthenticated, "no credential")
	case Node:
		rule, ok := nodeRules[method]
		if !ok && methodRules[method].scope == scopeSelf {
			// Who am I, may I: every authenticated caller, nodes too.
			return nodeRule{}, nil
		}
		if !ok {
			return nodeRule{}, status.Errorf(codes.PermissionDenied, "%s may not call %s: it is not for nodes", id, shortMethod(method))
		}
		return rule, nil
	}
	rule, ok := methodRules[method]
	if !ok {
		return nodeRule{}, status.Errorf(codes.PermissionDenied, "%s may not call %s: it has no authorization rule", id, method)
	}
	_, err := s.roles.decide(ctx, id, func(g grants) error { return rule.allowsMethod(id, g, method) })
	return nodeRule{}, err
}

// allowsMethod is nil when some request of method could be allowed to a
// caller holding g.
func (r methodRule) allowsMethod(id Identity, g grants, method string) error {
	if g.cluster == roleClusterAdmin {
		return nil
	}
	switch r.scope {
	case scopeSelf, scopeJoin:
		return nil
	case scopeCluster:
		if g.cluster < r.role {
			return describeRefusal(id, g, method, "", clusterNeed(r.role))
		}
	case scopeBound:
		if g.highest() < r.role {
			return describeRefusal(id, g, method, "", "a role in some namespace (a RoleBinding or ClusterRoleBinding)")
		}
	case scopeNamespace:
		// Only a caller with no role anywhere is refused before the
		// request is read: anyone else is refused with the namespace
		// named (and recorded in the audit trail with it), at the cost
		// of reading a body its size limits bound.
		if g.highest() == roleNone {
			return describeRefusal(id, g, method, "", r.role.String()+" in the request's namespace")
		}
	}
	return nil
}

// clusterNeed names what a cluster-wide rule of role needs.
func clusterNeed(r role) string {
	if r == roleClusterAdmin {
		return apiv1.RoleClusterAdmin
	}
	return r.String() + " in every namespace (a ClusterRoleBinding)"
}

// allowsIn is nil when a caller holding g may call method on t: the one
// rule of namespaced requests, for calls (authorizeRequest) and for CanI.
func (r methodRule) allowsIn(id Identity, g grants, method string, t target) error {
	switch {
	case g.cluster == roleClusterAdmin:
		return nil
	case t.clusterAdmin:
		return describeRefusal(id, g, method, "", apiv1.RoleClusterAdmin+" for "+t.why)
	case t.all:
		if g.cluster < r.role {
			return describeRefusal(id, g, method, "in all namespaces", clusterNeed(r.role)+"; set the namespace")
		}
	case g.in(t.ns) < r.role:
		return describeRefusal(id, g, method, "in namespace "+t.ns, r.role.String()+" in "+t.ns)
	}
	return nil
}

// authorizeRequest decides a user's or service account's call with its
// decoded request (a stream's first message): the rule's namespace, and
// the trim of the response (nil: none). The decision is kept on the
// call, to be taken again when the caller's bindings change (recheck).
func (s *Server) authorizeRequest(ctx context.Context, id Identity, method string, req any) (func(any) any, error) {
	rule, ok := methodRules[method]
	if !ok {
		return nil, status.Errorf(codes.PermissionDenied, "%s may not call %s: it has no authorization rule", id, method)
	}
	g, err := s.roles.decide(ctx, id, func(g grants) error { return rule.allowsMethod(id, g, method) })
	if err != nil {
		return nil, err
	}
	check := callCheck{id: id, method: method, rule: rule}
	defer func() { keepCheck(ctx, check) }()
	if g.cluster == roleClusterAdmin {
		return nil, nil
	}
	if rule.scope == scopeNamespace {
		tf := rule.target
		if tf == nil {
			tf = requestTarget
		}
		t, err := tf(ctx, s, req)
		if err != nil {
			return nil, err
		}
		if g, err = s.roles.decide(ctx, id, func(g grants) error { return rule.allowsIn(id, g, method, t) }); err != nil {
			return nil, err
		}
		check.t = &t
	}
	if rule.after == nil {
		return nil, nil
	}
	return func(resp any) any { return rule.after(g, resp) }, nil
}

// callCheck is a decided call of a user or service account.
type callCheck struct {
	id     Identity
	method string
	rule   methodRule
	// t is the request's target; nil when the caller was a
	// cluster-admin, who needs none.
	t *target
}

// recheck decides c again on the caller's bindings now: an open watch or
// console of a caller who lost the role that allowed it ends
// (usercreds.go, recheckSubjects).
func (s *Server) recheck(c callCheck) error {
	g, err := s.roles.grantsOf(c.id)
	if err != nil {
		// Still loading: the call was allowed and nothing says otherwise.
		return nil
	}
	if err := c.rule.allowsMethod(c.id, g, c.method); err != nil {
		return err
	}
	switch {
	case g.cluster == roleClusterAdmin || c.rule.scope != scopeNamespace:
		return nil
	case c.t == nil:
		return describeRefusal(c.id, g, c.method, "", "cluster-admin, which it held when it made the call")
	}
	return c.rule.allowsIn(c.id, g, c.method, *c.t)
}

func (s *Server) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	id := IdentityFrom(ctx)
	rule, err := s.authorize(ctx, id, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if id.Kind == User || id.Kind == ServiceAccount {
		after, err := s.authorizeRequest(ctx, id, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		resp, err := h(ctx, req)
		if err != nil || after == nil {
			return resp, err
		}
		return after(resp), nil
	}
	if rule.before != nil {
		if err := rule.before(id.Node, req); err != nil {
			return nil, err
		}
	}
	resp, err := h(ctx, req)
	if err != nil || rule.after == nil {
		return resp, err
	}
	return rule.after(id.Node, resp)
}

func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx := ss.Context()
	id := IdentityFrom(ctx)
	rule, err := s.authorize(ss.Context(), id, info.FullMethod)
	if err != nil {
		return err
	}
	switch {
	case id.Kind == User || id.Kind == ServiceAccount:
		ss = &checkedStream{ServerStream: ss, check: func(m any) error {
			_, err := s.authorizeRequest(ctx, id, info.FullMethod, m)
			return err
		}}
	case rule.before != nil:
		ss = &checkedStream{ServerStream: ss, check: func(m any) error { return rule.before(id.Node, m) }}
	}
	return h(srv, ss)
}

// checkedStream runs check on the first message a stream receives, which
// for a server stream is its request.
type checkedStream struct {
	grpc.ServerStream
	check   func(any) error
	checked bool
}

func (c *checkedStream) RecvMsg(m any) error {
	if err := c.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if !c.checked {
		c.checked = true
		return c.check(m)
	}
	return nil
}
