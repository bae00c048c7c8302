package nodeagent

// action is what one handler pass does with a VMI and its domain.
type action int

const (
	// The zero action is no decision; decide always makes one.
	_ action = iota
	// actShutdown stops the guest gracefully: ACPI until the grace period
	// ends, then a kill.
	actShutdown
	// actDelete records the final phase if the VMI has none, then removes
	// the domain and everything local (launcher, files, state record).
	actDelete
	// actUpdate converges the domain on the VMI: prepare, launch, sync,
	// pause, and report Running.
	actUpdate
)

func (a action) String() string {
	return [...]string{"none", "shutdown", "delete", "update"}[a]
}

// observation is what the decision depends on.
type observation struct {
	VMIExists   bool
	VMIDeleting bool // deletion timestamp set
	VMIFinal    bool // Succeeded or Failed
	// VMIStarting: Scheduled and within the slow-start window, so a
	// domain that is defined but off is still starting.
	VMIStarting  bool
	DomainExists bool
	DomainAlive  bool
	// DomainNeverStarted: shut off for no known reason.
	DomainNeverStarted bool
}

// decide is KubeVirt's handler decision (pkg/virt-handler/vm.go sync),
// in its priority order: shutdown > delete > update.
//
//	VMI gone or deleting, domain alive        → shutdown
//	VMI gone or deleting, domain not alive    → delete
//	VMI final                                 → delete
//	domain exists, not alive, VMI not final   → delete (records the phase first)
//	  except: never started, VMI still starting → update (KubeVirt defers
//	  this case for 5 minutes because the domain may still be booting; here
//	  Sync starts it)
//	otherwise                                 → update
func decide(o observation) action {
	switch {
	case !o.VMIExists || o.VMIDeleting:
		if o.DomainAlive {
			return actShutdown
		}
		return actDelete
	case o.VMIFinal:
		return actDelete
	case o.DomainExists && !o.DomainAlive:
		if o.DomainNeverStarted && o.VMIStarting {
			return actUpdate
		}
		return actDelete
	}
	return actUpdate
}
