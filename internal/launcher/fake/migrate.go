package fake

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// The fake's migrations are records a test drives: Migrate and Incoming
// start one (running), SetMigration ends or changes it, AbortMigration
// marks it aborting. Moving the domain between two fakes is the test's.

func (c *client) Migrate(ctx context.Context, req *launcherpb.MigrateRequest) (*launcherpb.MigrationStatus, error) {
	if err := c.enter(ctx, Call{Op: "Migrate"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if cur := m.migrations[c.domain]; cur != nil {
		if cur.GetMigrationUid() == req.GetMigrationUid() {
			return proto.Clone(cur).(*launcherpb.MigrationStatus), nil
		}
		if cur.GetRunning() {
			return nil, status.Errorf(codes.FailedPrecondition, "migration %s is still running", cur.GetMigrationUid())
		}
	}
	d := m.domains[c.domain]
	if d == nil || d.State != StateRunning && d.State != StatePaused {
		return nil, status.Errorf(codes.FailedPrecondition, "domain %s is not running", c.domain)
	}
	st := &launcherpb.MigrationStatus{MigrationUid: req.GetMigrationUid(), Role: "source", Running: true, Mode: apiv1.MigrationModePreCopy}
	m.setMigrationLocked(c.domain, st)
	return proto.Clone(st).(*launcherpb.MigrationStatus), nil
}

func (c *client) GetMigration(ctx context.Context) (*launcherpb.MigrationStatus, error) {
	if err := c.enter(ctx, Call{Op: "GetMigration"}); err != nil {
		return nil, err
	}
	defer c.m.mu.Unlock()
	if cur := c.m.migrations[c.domain]; cur != nil {
		return proto.Clone(cur).(*launcherpb.MigrationStatus), nil
	}
	return &launcherpb.MigrationStatus{}, nil
}

func (c *client) AbortMigration(ctx context.Context) (*launcherpb.MigrationStatus, error) {
	if err := c.enter(ctx, Call{Op: "AbortMigration"}); err != nil {
		return nil, err
	}
	defer c.m.mu.Unlock()
	cur := c.m.migrations[c.domain]
	if cur == nil || cur.GetRole() != "source" {
		return nil, status.Error(codes.FailedPrecondition, "this launcher runs no outgoing migration")
	}
	if cur.GetRunning() {
		cur.AbortStatus = apiv1.MigrationAbortAborting
	}
	return proto.Clone(cur).(*launcherpb.MigrationStatus), nil
}

func (c *client) Incoming(ctx context.Context, migrationUID string, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions, _ time.Duration) (*launcherpb.MigrationStatus, error) {
	if err := c.enter(ctx, Call{Op: "Incoming"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if cur := m.migrations[c.domain]; cur != nil && cur.GetMigrationUid() == migrationUID {
		return proto.Clone(cur).(*launcherpb.MigrationStatus), nil
	}
	if d := m.domains[c.domain]; d != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "domain %s already exists", c.domain)
	}
	m.domains[c.domain] = &Domain{
		Name: c.domain, UUID: vmi.GetStatus().GetDomainUuid(), VMIUID: vmi.GetMetadata().GetUid(),
		VMIKey: vmi.GetMetadata().GetNamespace() + "/" + vmi.GetMetadata().GetName(),
		State:  StateShutoff, Reason: ReasonUnknown, Node: vmi.GetStatus().GetNodeName(),
		NodeFailurePolicy: opts.GetNodeFailurePolicy(),
	}
	st := &launcherpb.MigrationStatus{MigrationUid: migrationUID, Role: "target", Running: true, DomainXml: "<domain/>"}
	m.setMigrationLocked(c.domain, st)
	return proto.Clone(st).(*launcherpb.MigrationStatus), nil
}

// SetMigration replaces the migration record of a domain's launcher (a
// test ends a migration with it).
func (m *Manager) SetMigration(domain string, st *launcherpb.MigrationStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setMigrationLocked(domain, proto.Clone(st).(*launcherpb.MigrationStatus))
}

// Migration returns the migration record of a domain's launcher.
func (m *Manager) Migration(domain string) *launcherpb.MigrationStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.migrations[domain]; st != nil {
		return proto.Clone(st).(*launcherpb.MigrationStatus)
	}
	return nil
}

func (m *Manager) setMigrationLocked(domain string, st *launcherpb.MigrationStatus) {
	if m.migrations == nil {
		m.migrations = map[string]*launcherpb.MigrationStatus{}
	}
	m.migrations[domain] = st
}
