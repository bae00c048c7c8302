package export

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// decision is what the controller makes of an export: its phase with the
// reason, and when Ready, what is served where.
type decision struct {
	phase, reason, message string
	node                   string
	sourceUID, contentUID  string
	volumes                []*apiv1.ExportVolume
	cert                   string
}

// Reconcile decides one export's phase and writes it when it changed;
// a live export is looked at again when it expires.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	e, ok := c.expInf.GetByKey(key)
	if !ok || e.GetMetadata().GetDeletionTimestamp() != nil || e.Terminal() {
		return controller.Result{}, nil
	}
	now := c.opts.Clock.Now()
	d := c.decide(e, now)
	if err := c.write(ctx, e, d, now); err != nil {
		return controller.Result{}, err
	}
	if d.phase == apiv1.ExportTerminated || d.phase == apiv1.ExportSkipped {
		return controller.Result{}, nil
	}
	// Whatever else happens, the export ends at its expiry.
	return controller.Result{RequeueAfter: max(e.GetStatus().GetExpirationTime().AsTime().Sub(now), time.Millisecond)}, nil
}

func (c *Controller) decide(e *apiv1.VirtualMachineExport, now time.Time) decision {
	st := e.GetStatus()
	if exp := st.GetExpirationTime(); exp == nil || !now.Before(exp.AsTime()) {
		return decision{phase: apiv1.ExportTerminated, reason: apiv1.ExportReasonExpired, message: "The export's TTL ran out"}
	}
	ns, name := e.GetMetadata().GetNamespace(), e.GetSpec().GetSourceName()
	var d decision
	if e.GetSpec().GetSourceKind() == apiv1.KindSnapshot {
		d = c.fromSnapshot(ns, name)
	} else {
		d = c.fromVM(ns, name, st.GetPhase() == apiv1.ExportReady)
	}
	if d.phase != "" {
		return d
	}
	n, ok := c.nodeInf.Get("", d.node)
	addr, cert := n.GetStatus().GetExportAddress(), n.GetStatus().GetExportCertificate()
	if !ok || addr == "" || cert == "" {
		return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonNoNode,
			message: fmt.Sprintf("Node %s holds the volumes but serves no exports: start its agent with --export-address", d.node)}
	}
	for _, v := range d.volumes {
		for _, f := range apiv1.ExportFormats {
			v.Links = append(v.Links, &apiv1.ExportLink{Format: f, Url: apiv1.ExportURL(addr, ns, e.GetMetadata().GetName(), v.GetName(), f)})
		}
	}
	d.phase, d.reason, d.cert = apiv1.ExportReady, apiv1.ExportReasonServing, cert
	if d.message == "" {
		d.message = "Served by node " + d.node
	}
	return d
}

// fromVM: a stopped VM's persistent volumes, served by the node that
// holds them. A VM with an instance runs: its export waits (Pending), or
// ends (Terminated) when it had been Ready, as KubeVirt's.
func (c *Controller) fromVM(ns, name string, wasReady bool) decision {
	vm, ok := c.vmInf.Get(ns, name)
	if !ok {
		return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonSourceGone, message: fmt.Sprintf("VM %s/%s not found", ns, name)}
	}
	if _, running := c.vmiInf.Get(ns, name); running {
		if wasReady {
			return decision{phase: apiv1.ExportTerminated, reason: apiv1.ExportReasonVMStarted, message: "The VM started: its export ended"}
		}
		return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonVMRunning, message: "The VM runs: its volumes are exported once it stops"}
	}
	d := decision{sourceUID: vm.GetMetadata().GetUid(), node: vm.GetStatus().GetNodeName()}
	var skipped, classes []string
	local := false
	for _, v := range vm.GetSpec().GetTemplate().GetSpec().GetVolumes() {
		pv := v.GetPersistent()
		if pv == nil {
			continue
		}
		if !c.exportable(pv.GetStorageClass()) {
			skipped = append(skipped, v.GetName())
			continue
		}
		if pv.IsLocal() {
			local = true
		} else if !slices.Contains(classes, pv.GetStorageClass()) {
			classes = append(classes, pv.GetStorageClass())
		}
		d.volumes = append(d.volumes, &apiv1.ExportVolume{Name: v.GetName(), StorageClass: pv.GetStorageClass()})
	}
	if len(d.volumes) == 0 {
		return decision{phase: apiv1.ExportSkipped, reason: apiv1.ExportReasonNoVolumes, message: "The VM has no persistent volume to export" + skippedNote(skipped)}
	}
	if d.node == "" && (local || len(classes) == 0) {
		// Volumes are made at a VM's first start.
		return decision{phase: apiv1.ExportSkipped, reason: apiv1.ExportReasonNoVolumes, message: "The VM never ran: its volumes were never made"}
	}
	if !local {
		// Volumes every node of their classes reaches: the VM's last node
		// if it serves exports and reaches them, else another that does.
		d.node = c.servingNode(d.node, classes)
		if d.node == "" {
			return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonNoNode,
				message: "No node that serves exports (--export-address) reaches storage class(es) " + strings.Join(classes, ", ")}
		}
	}
	d.message = skippedNote(skipped)
	return d
}

// servingNode is prefer when it serves exports and reports every class
// ready, else the first such node by name, else "".
func (c *Controller) servingNode(prefer string, classes []string) string {
	ok := func(n *apiv1.Node) bool {
		if n.GetStatus().GetExportAddress() == "" || n.GetStatus().GetExportCertificate() == "" {
			return false
		}
		for _, cl := range classes {
			if !slices.ContainsFunc(n.GetStatus().GetStorage(), func(s *apiv1.NodeStorage) bool { return s.GetClass() == cl && s.GetReady() }) {
				return false
			}
		}
		return true
	}
	if n, found := c.nodeInf.Get("", prefer); found && ok(n) {
		return prefer
	}
	nodes := c.nodeInf.List()
	slices.SortFunc(nodes, func(a, b *apiv1.Node) int {
		return strings.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName())
	})
	for _, n := range nodes {
		if ok(n) {
			return n.GetMetadata().GetName()
		}
	}
	return ""
}

// fromSnapshot: a ready snapshot's copies of local volumes, on the node
// that took it.
func (c *Controller) fromSnapshot(ns, name string) decision {
	s, ok := c.snapInf.Get(ns, name)
	if !ok {
		return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonSourceGone, message: fmt.Sprintf("snapshot %s/%s not found", ns, name)}
	}
	st := s.GetStatus()
	if !st.GetReadyToUse() {
		return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonSourceGone, message: fmt.Sprintf("snapshot %s/%s is not ready to use", ns, name)}
	}
	content, ok := c.contInf.Get(ns, st.GetContentName())
	if !ok {
		return decision{phase: apiv1.ExportPending, reason: apiv1.ExportReasonSourceGone, message: fmt.Sprintf("snapshot content %s/%s not found", ns, st.GetContentName())}
	}
	d := decision{sourceUID: st.GetSourceUid(), contentUID: content.GetMetadata().GetUid(), node: st.GetNodeName()}
	var skipped []string
	for _, b := range content.GetStatus().GetVolumeBackups() {
		// Only a copy in the node's snapshot directory: a local volume's.
		if b.GetPath() == "" || !(&apiv1.PersistentVolume{StorageClass: b.GetStorageClass()}).IsLocal() {
			skipped = append(skipped, b.GetVolumeName())
			continue
		}
		d.volumes = append(d.volumes, &apiv1.ExportVolume{Name: b.GetVolumeName()})
	}
	if len(d.volumes) == 0 || d.node == "" {
		return decision{phase: apiv1.ExportSkipped, reason: apiv1.ExportReasonNoVolumes, message: "The snapshot has no copy of a local volume" + skippedNote(skipped)}
	}
	d.message = skippedNote(skipped)
	return d
}

// exportable says whether a class's volumes can be served: local ones,
// files on a shared filesystem, RBD images.
func (c *Controller) exportable(class string) bool {
	if (&apiv1.PersistentVolume{StorageClass: class}).IsLocal() {
		return true
	}
	sc, ok := c.classInf.Get("", class)
	return ok && (sc.GetSpec().GetSharedFilesystem() != nil || sc.GetSpec().GetRbd() != nil)
}

func skippedNote(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("; not exported (their storage class is not found): %s", strings.Join(names, ", "))
}

// write stores the decision when it changes the export. Once Ready, the
// node, source and links stay as they were served (a Terminated export
// keeps its node label, so that node stops serving and cleans up).
func (c *Controller) write(ctx context.Context, e *apiv1.VirtualMachineExport, d decision, now time.Time) error {
	next := proto.Clone(e).(*apiv1.VirtualMachineExport)
	st := next.Status
	if st == nil {
		st = &apiv1.VirtualMachineExportStatus{}
		next.Status = st
	}
	st.Phase = d.phase
	if d.phase == apiv1.ExportReady || d.phase == apiv1.ExportPending {
		st.NodeName, st.SourceUid, st.ContentUid, st.Volumes, st.CaCert = d.node, d.sourceUID, d.contentUID, d.volumes, d.cert
		if d.phase == apiv1.ExportPending {
			st.Volumes, st.CaCert = nil, ""
		}
	}
	status := apiv1.ConditionFalse
	if d.phase == apiv1.ExportReady {
		status = apiv1.ConditionTrue
		if next.Metadata.Labels == nil {
			next.Metadata.Labels = map[string]string{}
		}
		next.Metadata.Labels[apiv1.LabelNodeName] = d.node
	}
	msg := strings.TrimPrefix(d.message, "; ")
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{Type: apiv1.ConditionReady, Status: status, Reason: d.reason, Message: msg}, now)
	if proto.Equal(next, e) {
		return nil
	}
	if _, err := c.exports.Update(ctx, next); err != nil {
		return err
	}
	if st.Phase != e.GetStatus().GetPhase() {
		c.log.Info("export "+strings.ToLower(st.Phase), "export", informer.Key(e), "reason", d.reason, "node", st.GetNodeName())
	}
	return nil
}
