// Package cloudinit builds the seed disks through which virtual machines
// get their cloud-init configuration.
//
// A NoCloud seed is an ISO 9660 filesystem labelled "cidata" holding
// meta-data, user-data and optionally network-config; cloud-init finds it
// by its label on any attached disk (KubeVirt's cloudInitNoCloud volume).
// The image is written here rather than by shelling out to genisoimage or
// xorriso, so nodes need no ISO tools and equal seeds give equal bytes.
package cloudinit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"
)

// VolumeLabel is the filesystem label cloud-init's NoCloud datasource
// looks for.
const VolumeLabel = "cidata"

// The files of a NoCloud seed, named as cloud-init reads them.
const (
	MetaDataFile      = "meta-data"
	UserDataFile      = "user-data"
	NetworkConfigFile = "network-config"
)

// Seed is what goes on a NoCloud seed.
type Seed struct {
	// InstanceID goes into meta-data as instance-id; cloud-init re-runs
	// its per-instance modules when it changes. Use the VMI's UID.
	InstanceID string
	// Hostname goes into meta-data as local-hostname; empty leaves it out.
	Hostname string
	// UserData is the user-data file, verbatim (#cloud-config, a script,
	// a MIME multipart...). It may be empty; the file is always written.
	UserData string
	// NetworkConfig is the network-config file (version 1 or 2), written
	// only when not empty.
	NetworkConfig string
	// ModTime stamps the files and the volume. The zero value means the
	// Unix epoch, so that the image depends on nothing but the seed.
	ModTime time.Time
}

// MetaData renders the meta-data file: YAML with instance-id and, when
// set, local-hostname.
func (s Seed) MetaData() (string, error) {
	if s.InstanceID == "" {
		return "", fmt.Errorf("cloud-init seed: instance ID is required")
	}
	for _, f := range [][2]string{{"instance ID", s.InstanceID}, {"hostname", s.Hostname}} {
		if strings.ContainsFunc(f[1], unicode.IsControl) {
			return "", fmt.Errorf("cloud-init seed: %s %q contains control characters", f[0], f[1])
		}
	}
	md := map[string]string{"instance-id": s.InstanceID}
	if s.Hostname != "" {
		md["local-hostname"] = s.Hostname
	}
	// The YAML encoder sorts keys and quotes values that would otherwise
	// read as numbers, booleans or nulls (a hostname "123", say).
	b, err := yaml.Marshal(md)
	if err != nil {
		return "", fmt.Errorf("cloud-init seed: meta-data: %w", err)
	}
	return string(b), nil
}

// BuildNoCloudISO writes the NoCloud seed ISO for seed to w: volume label
// "cidata", files meta-data, user-data and (when given) network-config,
// with Rock Ridge and Joliet names so that they read back exactly so.
func BuildNoCloudISO(w io.Writer, seed Seed) error {
	md, err := seed.MetaData()
	if err != nil {
		return err
	}
	files := []isoFile{
		{name: MetaDataFile, data: []byte(md)},
		{name: UserDataFile, data: []byte(seed.UserData)},
	}
	if seed.NetworkConfig != "" {
		files = append(files, isoFile{name: NetworkConfigFile, data: []byte(seed.NetworkConfig)})
	}
	mtime := seed.ModTime
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	if err := writeISO(w, files, isoOptions{volumeID: VolumeLabel, modTime: mtime}); err != nil {
		return fmt.Errorf("cloud-init seed: %w", err)
	}
	return nil
}

// WriteNoCloudISO writes the seed ISO to path atomically: a temporary
// file in the same directory, synced, then renamed over path, so a VM
// never boots from half a seed. perm is the file's mode; user-data often
// holds secrets (passwords, keys), so keep it as tight as the hypervisor
// allows (libvirt's dynamic ownership hands the file to QEMU even at 0600).
func WriteNoCloudISO(path string, perm os.FileMode, seed Seed) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("cloud-init seed: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("cloud-init seed: %w", err)
	}
	if err = BuildNoCloudISO(f, seed); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("cloud-init seed: sync %s: %w", f.Name(), err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("cloud-init seed: close %s: %w", f.Name(), err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("cloud-init seed: %w", err)
	}
	return nil
}
