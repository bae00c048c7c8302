// Package state is the node agent's local database (Nomad's client/state):
// what it must remember across its own restarts, chiefly the launcher
// handle of every VMI it runs. Records are keyed by VMI uid, so a new VMI
// that reuses a name never inherits an old one's launcher.
//
// BoltDB is the production implementation, MemDB the one for tests; both
// pass the same suite (db_test.go).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// ErrNotFound is returned for a record that does not exist.
var ErrNotFound = errors.New("not found")

// VMI is what the node agent keeps per VMI it handles. It outlives the VMI
// object: a deleted VMI's grace period and launcher are still needed to
// shut its domain down.
type VMI struct {
	UID        string `json:"uid"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	DomainName string `json:"domain_name"`
	// Handle finds the launcher again after an agent restart; its Addr is
	// empty until a launcher was started.
	Handle launcher.Handle `json:"handle"`
	// GracePeriodSeconds is the VMI's termination grace period, refreshed
	// from the VMI while it exists (a force stop shortens it).
	GracePeriodSeconds int64 `json:"grace_period_seconds"`
	// NodeFailurePolicy decides whether the launcher's self-fencing lease
	// is renewed (RestartElsewhere) or never armed (Wait).
	NodeFailurePolicy string `json:"node_failure_policy"`
	// ShutdownStartedAt is the wall-clock time of the first ACPI shutdown
	// request: the grace period runs from it, across agent restarts.
	ShutdownStartedAt time.Time `json:"shutdown_started_at,omitzero"`
	// Dir is the VMI's directory under the node data dir (console log,
	// disk overlays); it is removed on cleanup.
	Dir       string    `json:"dir"`
	CreatedAt time.Time `json:"created_at"`
	// VMUID is the uid of the VM that owns the VMI, if any: its
	// persistent volumes and kept console logs live under
	// <node data dir>/vms/<VMUID>.
	VMUID string `json:"vm_uid,omitempty"`
	// IncomingMigration is the uid of the live migration this node is the
	// target of, until the instance is this node's: the record then
	// belongs to a receiving domain, whose files were made blank for it
	// (IncomingPrepared says for which migration they were made).
	IncomingMigration string `json:"incoming_migration,omitempty"`
	IncomingPrepared  string `json:"incoming_prepared,omitempty"`
	// MigratedAway is the uid of the live migration that moved the
	// instance to another node: its VM's volumes were copied there, so
	// the cleanup removes this node's copies too.
	MigratedAway string `json:"migrated_away,omitempty"`
	// AdoptedUUID is the UUID of the domain defined outside virtplane
	// that this instance takes over (docs/adopt.md), whose name is
	// DomainName; "" for an instance whose domain virtplane defines.
	AdoptedUUID string `json:"adopted_uuid,omitempty"`
}

// Key is the VMI's namespace/name.
func (v *VMI) Key() string { return apiv1.Ref(v.Namespace, v.Name) }

// HasLauncher reports whether a launcher was started for the VMI.
func (v *VMI) HasLauncher() bool { return v.Handle.Addr != "" }

// encode is the record as PutVMI stores it; a record needs its uid.
func (v *VMI) encode() ([]byte, error) {
	if v.UID == "" {
		return nil, errors.New("vmi record without uid")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding vmi record %s: %w", v.UID, err)
	}
	return raw, nil
}

// Node is node-wide state.
type Node struct {
	// LeaseExpiry is the wall-clock end of the last lease the control
	// plane granted. An agent starting after it destroys its
	// RestartElsewhere domains before it heartbeats again
	// (docs/failover.md, fail-safe restarts): the monotonic clock the
	// running agent uses does not survive a restart.
	LeaseExpiry time.Time `json:"lease_expiry,omitzero"`
}

// StateDB stores the node agent's records. Methods take no context: the
// database is a local file whose calls do not block on anything remote.
type StateDB interface {
	// GetVMI returns the record of uid, or ErrNotFound.
	GetVMI(uid string) (*VMI, error)
	// GetVMIByKey returns the record of the VMI namespace/name, or
	// ErrNotFound, without reading the others. A key has at most one
	// record: the handler records a VMI that reused a name only once it
	// dropped the old VMI's record (after its domain went), and PutVMI
	// refuses a second record of a key.
	GetVMIByKey(key string) (*VMI, error)
	// ListVMIs returns every record, sorted by uid.
	ListVMIs() ([]*VMI, error)
	// PutVMI creates or replaces the record of r.UID. It fails if
	// another record has r's key. A record's namespace/name never
	// changes: a uid is one VMI's.
	PutVMI(r *VMI) error
	// DeleteVMI removes the record of uid; a missing one is no error.
	DeleteVMI(uid string) error
	// GetNode returns the node record (zero when never written).
	GetNode() (*Node, error)
	PutNode(n *Node) error
	Close() error
}
