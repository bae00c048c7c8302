package apiv1

// Run strategies (KubeVirt core/v1 RunStrategy).
const (
	RunStrategyAlways         = "Always"
	RunStrategyRerunOnFailure = "RerunOnFailure"
	RunStrategyManual         = "Manual"
	RunStrategyHalted         = "Halted"
	RunStrategyOnce           = "Once"
)

// Node failure policies.
const (
	NodeFailurePolicyWait             = "Wait"
	NodeFailurePolicyRestartElsewhere = "RestartElsewhere"
)

// VMI phases.
const (
	PhaseUnset      = ""
	PhasePending    = "Pending"
	PhaseScheduling = "Scheduling"
	PhaseScheduled  = "Scheduled"
	PhaseRunning    = "Running"
	PhaseSucceeded  = "Succeeded"
	PhaseFailed     = "Failed"
	PhaseUnknown    = "Unknown"
)

// IsFinal reports whether a VMI phase is terminal.
func IsFinal(phase string) bool { return phase == PhaseSucceeded || phase == PhaseFailed }

// VM printable statuses, in the order the VM controller evaluates them.
const (
	PrintableTerminating        = "Terminating"
	PrintableStopping           = "Stopping"
	PrintableMigrating          = "Migrating"
	PrintablePaused             = "Paused"
	PrintableRunning            = "Running"
	PrintableDataVolumeError    = "DataVolumeError"
	PrintableErrorUnschedulable = "ErrorUnschedulable"
	PrintableProvisioning       = "Provisioning"
	PrintableStarting           = "Starting"
	PrintableCrashLoopBackOff   = "CrashLoopBackOff"
	PrintableStopped            = "Stopped"
	PrintableUnknown            = "Unknown"
)

// Condition types.
const (
	ConditionReady             = "Ready"
	ConditionFailure           = "Failure"
	ConditionPaused            = "Paused"
	ConditionRestartRequired   = "RestartRequired"
	ConditionPodScheduled      = "PodScheduled" // KubeVirt's name for "placed on a node"
	ConditionSynchronized      = "Synchronized"
	ConditionSoftwareEmulation = "SoftwareEmulation"
	ConditionProvisioning      = "Provisioning"
	ConditionNodeFenced        = "Fenced"
)

// State change request actions.
const (
	StateChangeStart = "Start"
	StateChangeStop  = "Stop"
)

// ErrorDomain and the reasons below go into the google.rpc.ErrorInfo
// detail of API errors whose message alone a client should not have to
// parse.
const (
	ErrorDomain = "virtplane.io"
	// ReasonStoreUnavailable: the server is up but its etcd cannot decide
	// now (no leader: a majority of members is unreachable; or a request
	// timed out while it elected one). Another server of the list may be
	// on the majority side.
	ReasonStoreUnavailable = "StoreUnavailable"
	// ReasonEvictionTriggeredEvacuation: an eviction marked the instance
	// for evacuation instead of shutting it down (KubeVirt's 429
	// "Eviction triggered evacuation"); it leaves by migration.
	ReasonEvictionTriggeredEvacuation = "EvictionTriggeredEvacuation"
	// ReasonDisruptionBudget: the instance's eviction strategy forbids
	// shutting it down and it cannot migrate either.
	ReasonDisruptionBudget = "DisruptionBudget"
)

// Well-known names.
const (
	// FinalizerVMController is held by the VM controller on VMs (so it can
	// delete their instances first) and on VMIs (so it sees their final
	// phase before they vanish).
	FinalizerVMController = "virtplane.io/vm-controller"
	// AnnotationVMGeneration on a VMI records the VM generation it was
	// created from (RestartRequired detection).
	AnnotationVMGeneration = "virtplane.io/vm-generation"
	// AnnotationVMRanBefore on a VMI says its VM had an instance placed
	// before (VM status.node_name): its volumes on storage classes were
	// made then, so placement no longer needs the images they were made
	// from on the node (a failover target need not hold them).
	AnnotationVMRanBefore = "virtplane.io/vm-ran-before"
	// AnnotationNodeFailurePolicy on a VMI carries its VM's
	// node_failure_policy, so the node agent can self-fence without reading
	// VMs.
	AnnotationNodeFailurePolicy = "virtplane.io/node-failure-policy"
	// AnnotationEvicted on a VMI names the node an eviction shut it down
	// on: its end was not the guest's choice, so RerunOnFailure starts
	// it again (KubeVirt leaves such a VM stopped, kubevirt#9823).
	AnnotationEvicted = "virtplane.io/evicted"
	// LabelNodeName on a VMI names the node it runs on; every Node
	// carries it with its own name.
	LabelNodeName = "virtplane.io/node-name"
	// NodeLabelPrefix is the prefix of the labels a node sets on its own
	// Node (as Kubernetes' node.kubernetes.io/): its agent may set only
	// these, and every other label of a Node is set by admins, so that a
	// node cannot label itself into the placements an admin label gates
	// (docs/security.md). validation.NodeOwnedLabel tells them apart.
	NodeLabelPrefix = "node.virtplane.io/"
	// LabelKVM on a Node says whether guests there get KVM ("true") or
	// run in software emulation ("false"): the node agent sets it.
	LabelKVM = NodeLabelPrefix + "kvm"
	// KindVirtualMachine is the owner reference kind of VMIs.
	KindVirtualMachine = "VirtualMachine"
)

// Disk buses and interface models the launcher can build.
const (
	DiskBusVirtio = "virtio"
	DiskBusSATA   = "sata"
	DiskBusSCSI   = "scsi"

	InterfaceModelVirtio  = "virtio"
	InterfaceModelE1000   = "e1000"
	InterfaceModelRTL8139 = "rtl8139"
)

// Eviction strategies (KubeVirt core/v1 EvictionStrategy).
const (
	EvictionStrategyNone                  = "None"
	EvictionStrategyLiveMigrate           = "LiveMigrate"
	EvictionStrategyLiveMigrateIfPossible = "LiveMigrateIfPossible"
	EvictionStrategyExternal              = "External"
)

// Defaults the API applies to what a writer leaves unset
// (internal/api/validation) and that clients (the provider, the CLI) show
// for an unset attribute, so that what is read back never differs from
// what was left out.
const (
	DefaultNamespace         = "default"
	DefaultNodeFailurePolicy = NodeFailurePolicyWait
	// DefaultEvictionStrategy is the server's --default-eviction-strategy
	// default: it applies to instances that set none. KubeVirt's is None
	// (a drain shuts every such VM down); a drain here moves what can move
	// and restarts the rest per run strategy.
	DefaultEvictionStrategy = EvictionStrategyLiveMigrateIfPossible
	DefaultDiskBus          = DiskBusVirtio
	DefaultCDRomBus         = DiskBusSATA // KubeVirt: a CD-ROM cannot be virtio
	DefaultInterfaceModel   = InterfaceModelVirtio
	// A port forward binds the node's loopback unless told otherwise: a
	// guest service is not published to the network by accident.
	DefaultPortForwardAddress  = "127.0.0.1"
	DefaultPortForwardProtocol = "tcp"
)

// Where an instance's interface addresses came from (InterfaceStatus.source).
const (
	InterfaceSourceLease = "lease" // the libvirt network's DHCP server
	InterfaceSourceARP   = "arp"   // the node's neighbour table
	InterfaceSourceAgent = "agent" // the QEMU guest agent in the guest
)

// The allowed values of enumerated fields, in the order documentation and
// error messages list them. Each call returns a new slice.

// RunStrategies lists the run strategies virtplane supports.
func RunStrategies() []string {
	return []string{RunStrategyAlways, RunStrategyRerunOnFailure, RunStrategyManual, RunStrategyHalted, RunStrategyOnce}
}

// NodeFailurePolicies lists the node failure policies.
func NodeFailurePolicies() []string {
	return []string{NodeFailurePolicyWait, NodeFailurePolicyRestartElsewhere}
}

// EvictionStrategies lists the eviction strategies.
func EvictionStrategies() []string {
	return []string{EvictionStrategyNone, EvictionStrategyLiveMigrate, EvictionStrategyLiveMigrateIfPossible, EvictionStrategyExternal}
}

// DiskBuses lists the buses of a disk.
func DiskBuses() []string { return []string{DiskBusVirtio, DiskBusSATA, DiskBusSCSI} }

// CDRomBuses lists the buses of a CD-ROM (no virtio: QEMU has no virtio
// CD-ROM).
func CDRomBuses() []string { return []string{DiskBusSATA, DiskBusSCSI} }

// InterfaceModels lists the network interface models.
func InterfaceModels() []string {
	return []string{InterfaceModelVirtio, InterfaceModelE1000, InterfaceModelRTL8139}
}

// PrintableStatuses lists the VM printable statuses, most common first.
func PrintableStatuses() []string {
	return []string{
		PrintableRunning, PrintableStopped, PrintableStarting, PrintableStopping,
		PrintablePaused, PrintableMigrating, PrintableTerminating, PrintableCrashLoopBackOff,
		PrintableErrorUnschedulable, PrintableProvisioning, PrintableDataVolumeError,
		PrintableUnknown,
	}
}

// Condition reasons read by more than the component that writes them.
const (
	// ReasonDataVolumeError on a VMI's Synchronized=False condition marks
	// a persistent volume the node could not provision; the VM shows
	// printable status DataVolumeError, as KubeVirt does for a failed
	// DataVolume.
	ReasonDataVolumeError = "DataVolumeError"
)

// NodeHeader on a call over the agent's unix socket makes the caller the
// named node instead of an admin: role all's in-process node agent sends
// it so that it is held to what any node may do. Only the root-only socket
// honours it (a root caller is an admin and may act as less).
const NodeHeader = "virtplane-node"
