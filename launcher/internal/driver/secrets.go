package driver

import (
	"encoding/base64"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// SecretConn is a connection that can hold the keys of RBD disks
// (launcher/internal/virt implements it).
type SecretConn interface {
	SetCephSecret(usage string, value []byte) error
}

// setSecrets hands libvirt the keys the domain's RBD disks refer to,
// before it is defined or started: a key never goes into the domain XML.
// libvirt takes a ceph secret's value as the key's bytes, the key as
// `ceph auth get-key` prints it being their base64.
func (d *Driver) setSecrets(opts *launcherpb.SyncOptions) error {
	secrets := opts.GetCephSecrets()
	if len(secrets) == 0 {
		return nil
	}
	sc, ok := d.conn.(SecretConn)
	if !ok {
		return status.Error(codes.Unimplemented, "this libvirt connection cannot hold secrets for RBD disks")
	}
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(s.GetKey())
		if err != nil {
			// The value is a secret: never in the message.
			return status.Errorf(codes.InvalidArgument, "secret %s: the key is not base64", s.GetUsage())
		}
		if err := sc.SetCephSecret(s.GetUsage(), key); err != nil {
			return grpcError(fmt.Errorf("libvirt secret %s: %w", s.GetUsage(), err))
		}
	}
	return nil
}
