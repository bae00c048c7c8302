package target

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
)

// Reader answers what a target holds (the API's ListManifests) from its
// manifests, through a cache of open stores.
type Reader struct {
	Cache *Cache
	Opts  repo.Options
}

// ListManifests lists the backups t holds, newest first; only those of
// VMs named vmName when it is set.
func (r *Reader) ListManifests(ctx context.Context, t *apiv1.BackupTarget, vmName string) ([]*apiv1.BackupManifestInfo, error) {
	st, err := r.Cache.Store(ctx, t)
	if err != nil {
		_, msg := Explain(t, err)
		return nil, errorf(msg)
	}
	infos, err := repo.New(st, r.Opts).ListManifests(ctx)
	if err != nil {
		_, msg := Explain(t, err)
		return nil, errorf(msg)
	}
	out := make([]*apiv1.BackupManifestInfo, 0, len(infos))
	for _, m := range infos {
		if vmName != "" && m.VMName != vmName {
			continue
		}
		out = append(out, Info(m))
	}
	return out, nil
}

// Info is m as the API lists it.
func Info(m repo.ManifestInfo) *apiv1.BackupManifestInfo {
	return &apiv1.BackupManifestInfo{
		Id: m.ID, Cluster: m.Cluster, VmNamespace: m.VMNamespace, VmName: m.VMName, VmUid: m.VMUID,
		Created: timestamppb.New(m.Created), SizeBytes: m.SizeBytes, DataBytes: m.DataBytes, Volumes: int32(m.Volumes),
		Labels: m.Labels,
	}
}

type msgError string

func (e msgError) Error() string { return string(e) }

func errorf(msg string) error { return msgError(msg) }
