package driver

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// Incoming prepares this launcher as a migration target: it defines the
// domain — with this node's paths, the source's domain UUID and a record
// of the migration — but does not start it. The source reads that
// definition as the destination XML and libvirt starts it when the stream
// arrives; from then on Sync adopts it like any domain of this VMI.
// Calling it again for the same migration reports the same domain.
func (d *Driver) Incoming(ctx context.Context, req *launcherpb.IncomingRequest) (*launcherpb.MigrationStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	migUID := req.GetMigrationUid()
	vmi := req.GetSync().GetVmi()
	uid := vmi.GetMetadata().GetUid()
	domUUID := vmi.GetStatus().GetDomainUuid()
	switch {
	case migUID == "":
		return nil, status.Error(codes.InvalidArgument, "incoming: migration_uid is required")
	case uid == "":
		return nil, status.Error(codes.InvalidArgument, "incoming: vmi.metadata.uid is required")
	case domUUID == "":
		return nil, status.Error(codes.InvalidArgument, "incoming: vmi.status.domain_uuid (the source domain's UUID) is required")
	}
	opts := proto.Clone(req.GetSync().GetOptions()).(*launcherpb.SyncOptions)
	if opts == nil {
		opts = &launcherpb.SyncOptions{}
	}
	if opts.GetDomainName() == "" {
		opts.DomainName = d.cfg.DomainName
	} else if opts.GetDomainName() != d.cfg.DomainName {
		return nil, status.Errorf(codes.InvalidArgument, "incoming: this launcher manages domain %s, not %s", d.cfg.DomainName, opts.GetDomainName())
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uid == "" {
		d.uid = uid
	} else if d.uid != uid {
		return nil, status.Errorf(codes.InvalidArgument, "incoming: this launcher serves VMI uid %s, not %s", d.uid, uid)
	}
	// Renewed by every call, armed before anything is defined.
	d.incoming.renew(time.Duration(req.GetValidForMillis()) * time.Millisecond)
	// Applied when the guest arrives (networkAfter).
	if err := d.setNetSpec(vmi.GetSpec()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "incoming: %v", err)
	}

	dom, err := d.lookup()
	if err != nil {
		return nil, err
	}
	if dom != nil {
		defer dom.Free()
		md, err := d.owned(dom)
		if err != nil {
			return nil, err
		}
		if md.Migration == nil || md.Migration.UID != migUID || md.Migration.Role != RoleTarget {
			return nil, status.Errorf(codes.FailedPrecondition, "incoming: domain %s already exists and is not this migration's target", d.cfg.DomainName)
		}
		return d.incomingStatus(dom, md.Migration)
	}

	if err := d.setSecrets(opts); err != nil {
		return nil, err
	}
	def, err := domxml.Build(vmi, opts)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "incoming: build domain: %v", err)
	}
	def.UUID = domUUID
	x, err := def.Marshal()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "incoming: marshal domain: %v", err)
	}
	dom, err = d.conn.DomainDefineXML(x)
	if err != nil {
		return nil, grpcError(fmt.Errorf("define the receiving domain %s: %w", d.cfg.DomainName, err))
	}
	defer dom.Free()
	md, _, err := readMetadata(dom)
	if err != nil {
		return nil, grpcError(err)
	}
	md.Migration = &domxml.MigrationRecord{UID: migUID, Role: RoleTarget, Start: d.cfg.Now().UnixMilli()}
	if err := writeMetadata(dom, md); err != nil {
		return nil, grpcError(err)
	}
	// This launcher may have been an earlier migration's source: its
	// record in memory is not this one's.
	d.migs.mu.Lock()
	d.migs.cur = nil
	d.migs.mu.Unlock()
	d.log.Info("defined the receiving domain", "migration_uid", migUID, "uuid", domUUID)
	return d.incomingStatus(dom, md.Migration)
}

// incomingStatus is the target's migration status with the receiving
// domain's migratable XML, which the source needs as its destination XML.
func (d *Driver) incomingStatus(dom Domain, rec *domxml.MigrationRecord) (*launcherpb.MigrationStatus, error) {
	st, err := d.recordedMigration(dom, rec)
	if err != nil {
		return nil, err
	}
	mdom, ok := dom.(MigratingDomain)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "incoming: this libvirt domain cannot migrate")
	}
	if st.DomainXml, err = mdom.MigratableXML(); err != nil {
		return nil, grpcError(fmt.Errorf("read the receiving domain's XML: %w", err))
	}
	return st, nil
}

// dropIncoming removes the receiving domain when the node agent stopped
// renewing it, unless the guest has arrived: a domain running after the
// migration is this node's guest now, and its agent adopts it when it
// comes back.
func (d *Driver) dropIncoming(still func() bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !still() {
		return
	}
	dom, err := d.lookup()
	if err != nil || dom == nil {
		return
	}
	defer dom.Free()
	md, ok, err := readMetadata(dom)
	if err != nil || !ok || md.Migration == nil || md.Migration.Role != RoleTarget {
		return
	}
	st, reason, err := dom.GetState()
	if err != nil {
		d.log.Warn("incoming watchdog: reading the domain state", "err", err)
		return
	}
	arriving := st == StatePaused && ReasonName(st, reason) == "Migration"
	if st.Active() && !arriving {
		return
	}
	if st.Active() {
		if err := dom.Destroy(false); err != nil {
			d.log.Warn("incoming watchdog: destroying the receiving domain", "err", err)
			return
		}
	}
	if err := dom.Undefine(); err != nil {
		d.log.Warn("incoming watchdog: undefining the receiving domain", "err", err)
		return
	}
	d.log.Warn("removed the receiving domain: the node agent stopped renewing the migration target", "migration_uid", md.Migration.UID)
}
