package command

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/duration"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// none fills empty cells so that every row has the same number of words
// for awk and friends, as kubectl does.
const none = "<none>"

// tableHeader returns the columns for res; withNamespace adds NAMESPACE
// (get -A) for namespaced kinds.
func tableHeader(res *resource, withNamespace bool) []string {
	var cols []string
	switch res {
	case vmResource:
		cols = []string{"NAME", "AGE", "STATUS", "READY"}
	case vmiResource:
		cols = []string{"NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"}
	case migrationResource:
		cols = []string{"NAME", "VMI", "PHASE", "SOURCE", "TARGET", "PROGRESS", "AGE"}
	case replicaSetResource:
		// kubectl get rs's columns.
		cols = []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"}
	case poolResource:
		cols = []string{"NAME", "DESIRED", "CURRENT", "READY", "UPDATED", "AGE"}
	case snapshotResource:
		cols = []string{"NAME", "SOURCE", "PHASE", "READY", "INDICATIONS", "CREATED", "NODE", "AGE"}
	case snapshotContentResource:
		cols = []string{"NAME", "SNAPSHOT", "NODE", "PHASE", "READY", "VOLUMES", "AGE"}
	case restoreResource:
		cols = []string{"NAME", "TARGET", "SNAPSHOT", "PHASE", "COMPLETE", "RESTORED", "AGE"}
	case cloneResource:
		cols = []string{"NAME", "SOURCE", "TARGET", "PHASE", "AGE"}
	case nodeResource:
		return []string{"NAME", "STATUS", "AGE", "CPU", "MEMORY", "KVM", "IMAGES", "VERSION"}
	}
	if withNamespace && res.Namespaced {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	return cols
}

// tableRow renders obj for the columns of tableHeader; now fixes AGE.
func tableRow(obj object, now time.Time, withNamespace bool) []string {
	var row []string
	switch o := obj.(type) {
	case *apiv1.VirtualMachine:
		row = []string{
			o.GetMetadata().GetName(),
			age(o.GetMetadata().GetCreationTimestamp(), now),
			cell(o.GetStatus().GetPrintableStatus()),
			boolString(o.GetStatus().GetReady()),
		}
	case *apiv1.VirtualMachineInstance:
		ready := "False"
		if c := findCondition(o.GetStatus().GetConditions(), "Ready"); c != nil && c.GetStatus() != "" {
			ready = c.GetStatus()
		}
		row = []string{
			o.GetMetadata().GetName(),
			age(o.GetMetadata().GetCreationTimestamp(), now),
			cell(o.GetStatus().GetPhase()),
			cell(vmiIP(o)),
			cell(o.GetStatus().GetNodeName()),
			ready,
		}
	case *apiv1.VirtualMachineInstanceMigration:
		row = migrationRow(o, now)
	case *apiv1.VirtualMachineInstanceReplicaSet:
		row = []string{
			o.GetMetadata().GetName(),
			count(o.GetSpec().DesiredReplicas()),
			count(o.GetStatus().GetReplicas()),
			count(o.GetStatus().GetReadyReplicas()),
			age(o.GetMetadata().GetCreationTimestamp(), now),
		}
	case *apiv1.VirtualMachinePool:
		row = []string{
			o.GetMetadata().GetName(),
			count(o.GetSpec().DesiredReplicas()),
			count(o.GetStatus().GetReplicas()),
			count(o.GetStatus().GetReadyReplicas()),
			count(o.GetStatus().GetUpdatedReplicas()),
			age(o.GetMetadata().GetCreationTimestamp(), now),
		}
	case *apiv1.VirtualMachineSnapshot:
		row = snapshotRow(o, now)
	case *apiv1.VirtualMachineSnapshotContent:
		row = snapshotContentRow(o, now)
	case *apiv1.VirtualMachineRestore:
		row = restoreRow(o, now)
	case *apiv1.VirtualMachineClone:
		row = cloneRow(o, now)
	case *apiv1.Node:
		kvm := "tcg"
		if o.GetStatus().GetNodeInfo().GetKvmUsable() {
			kvm = "kvm"
		}
		alloc := o.GetStatus().GetAllocatable()
		return []string{
			o.GetMetadata().GetName(),
			nodeStatus(o),
			age(o.GetMetadata().GetCreationTimestamp(), now),
			cell(alloc["cpu"]),
			cell(alloc["memory"]),
			kvm,
			// A count, like kubectl's RESTARTS; -o yaml lists them.
			strconv.Itoa(len(o.GetStatus().GetImages())),
			cell(o.GetStatus().GetNodeInfo().GetAgentVersion()),
		}
	default:
		panic(fmt.Sprintf("tableRow: unexpected %T", obj))
	}
	if withNamespace {
		row = append([]string{obj.GetMetadata().GetNamespace()}, row...)
	}
	return row
}

// wideHeader returns the columns -o wide adds at the end of res's table,
// as kubectl's wide does: a node's bridges and libvirt networks (what
// placement matches instances' networks against), an instance's address
// on each interface, the volumes a snapshot copied and left out, the node
// a restore copies on, the snapshot and restore a clone made. Other kinds
// add none.
func wideHeader(res *resource) []string {
	switch res {
	case vmiResource:
		return []string{"IPS"}
	case snapshotResource:
		return []string{"INCLUDED", "EXCLUDED"}
	case restoreResource:
		return []string{"NODE"}
	case cloneResource:
		return []string{"SNAPSHOT", "RESTORE"}
	case nodeResource:
		return []string{"BRIDGES", "NETWORKS"}
	}
	return nil
}

// wideCells renders obj for the columns of wideHeader.
func wideCells(obj object) []string {
	switch o := obj.(type) {
	case *apiv1.VirtualMachineInstance:
		var ips []string
		for _, iface := range o.GetStatus().GetInterfaces() {
			if ip := ifaceIP(iface); ip != "" {
				ips = append(ips, ip)
			}
		}
		return []string{cell(strings.Join(ips, ","))}
	case *apiv1.Node:
		return []string{cell(strings.Join(o.GetStatus().GetBridges(), ",")), cell(strings.Join(o.GetStatus().GetNetworks(), ","))}
	case *apiv1.VirtualMachineSnapshot:
		return []string{cell(strings.Join(o.GetStatus().GetIncludedVolumes(), ",")), cell(strings.Join(o.GetStatus().GetExcludedVolumes(), ","))}
	case *apiv1.VirtualMachineRestore:
		return []string{cell(o.GetStatus().GetNodeName())}
	case *apiv1.VirtualMachineClone:
		return []string{cell(o.GetStatus().GetSnapshotName()), cell(o.GetStatus().GetRestoreName())}
	}
	return nil
}

// vmiIP is the first address of the first interface that has one.
func vmiIP(vmi *apiv1.VirtualMachineInstance) string {
	for _, iface := range vmi.GetStatus().GetInterfaces() {
		if ip := ifaceIP(iface); ip != "" {
			return ip
		}
	}
	return ""
}

// ifaceIP is an interface's first address, "" while it has none.
func ifaceIP(iface *apiv1.InterfaceStatus) string {
	if ip := iface.GetIpAddress(); ip != "" {
		return ip
	}
	if ips := iface.GetIpAddresses(); len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// nodeStatus follows kubectl: Ready/NotReady from the Ready condition
// (Unknown without one), plus SchedulingDisabled, plus Draining or
// Drained while a drain is on.
func nodeStatus(n *apiv1.Node) string {
	s := "Unknown"
	if c := findCondition(n.GetStatus().GetConditions(), "Ready"); c != nil {
		s = "NotReady"
		if c.GetStatus() == "True" {
			s = "Ready"
		}
	}
	if !n.GetStatus().GetSchedulable() || n.GetSpec().GetUnschedulable() {
		s += ",SchedulingDisabled"
	}
	if n.GetSpec().GetDrain() {
		if n.Drained() {
			s += ",Drained"
		} else {
			s += ",Draining"
		}
	}
	return s
}

func findCondition(conds []*apiv1.Condition, typ string) *apiv1.Condition {
	for _, c := range conds {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

func age(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.AsTime()))
}

func count(n int32) string { return strconv.FormatInt(int64(n), 10) }

func boolString(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func cell(s string) string {
	if s == "" {
		return none
	}
	return s
}

// printTable writes header and rows aligned like kubectl.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		if _, err := fmt.Fprintln(tw, strings.Join(r, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// streamTable prints rows one at a time (get -w), so a tabwriter, which
// aligns only what it has buffered, does not fit. Columns start at a
// sensible width and only grow, which keeps most rows aligned.
type streamTable struct {
	w      io.Writer
	widths []int
}

// minWidths are starting column widths for typical values.
var minWidths = map[string]int{
	"NAMESPACE": 10, "NAME": 20, "AGE": 5, "STATUS": 12, "PHASE": 10,
	"IP": 15, "IPS": 15, "NODENAME": 12, "CPU": 4, "MEMORY": 8, "VMI": 12, "SOURCE": 8, "TARGET": 8,
}

func newStreamTable(w io.Writer, header []string) (*streamTable, error) {
	t := &streamTable{w: w, widths: make([]int, len(header))}
	for i, h := range header {
		t.widths[i] = max(len(h), minWidths[h])
	}
	return t, t.row(header)
}

func (t *streamTable) row(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		n := utf8.RuneCountInString(c)
		if i < len(t.widths) && n > t.widths[i] {
			t.widths[i] = n
		}
		b.WriteString(c)
		if i < len(t.widths) {
			b.WriteString(strings.Repeat(" ", t.widths[i]-n))
		}
		b.WriteString("   ")
	}
	b.WriteString("\n")
	_, err := io.WriteString(t.w, b.String())
	return err
}
