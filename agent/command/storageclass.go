package command

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// storageclass create rbd|shared-filesystem: an admin's StorageClass from
// flags. get, delete and apply -f take storage classes as any kind
// (kinds_storage.go). The cephx key of an rbd class comes from a file or
// standard input, never from a flag: a flag's value is in the shell's
// history and in /proc/PID/cmdline, which every user of the host reads.

func newStorageClassCommand(root *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "storageclass",
		Aliases: []string{"sc"},
		Short:   "Create storage classes: where persistent volumes live when they must outlive a node (rbd, shared-filesystem)",
		Long: `Create a StorageClass, which persistent volumes name (persistent.storage_class)
to live on storage that outlives a node: an rbd pool of an existing Ceph
cluster, or a filesystem mounted at the same path on every node it selects
(NFS, CephFS). "local", a file in the VM's directory on its node, is built
in. A class's kind, rbd pool and filesystem path cannot change; its node
selector, monitors, user and key can (apply -f).

get storageclasses lists them (the key is never shown: KEY-SET says whether
the server holds one), delete storageclass NAME deletes one that no VM
uses. See docs/storage.md.`,
	}
	create := &cobra.Command{
		Use:   "create rbd|shared-filesystem NAME",
		Short: "Create a storage class",
	}
	create.AddCommand(newStorageClassCreateRBDCommand(root), newStorageClassCreateSharedCommand(root))
	cmd.AddCommand(create)
	return cmd
}

// storageClassFlags are what both kinds of class take.
type storageClassFlags struct {
	nodeSelector, labels map[string]string
}

func (f *storageClassFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringToStringVar(&f.nodeSelector, "node-selector", nil,
		"label KEY=VALUE a node must have to use the class (repeatable; every one must match); none: every node")
	cmd.Flags().StringToStringVar(&f.labels, "label", nil, "label of the class, KEY=VALUE (repeatable)")
}

func (f *storageClassFlags) class(name string, spec *apiv1.StorageClassSpec) *apiv1.StorageClass {
	spec.NodeSelector = f.nodeSelector
	return &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: name, Labels: f.labels}, Spec: spec}
}

func newStorageClassCreateRBDCommand(root *rootOptions) *cobra.Command {
	var (
		f                   storageClassFlags
		monitors            []string
		pool, user, keyFile string
	)
	cmd := &cobra.Command{
		Use:   "rbd NAME --monitor IP:PORT... --pool POOL --user USER --key-file FILE",
		Short: "Create a storage class on a pool of an existing Ceph cluster",
		Long: `Create a storage class whose volumes are RBD images in POOL of a Ceph
cluster, opened by QEMU itself as the cephx user USER (without "client.").

--key-file is the user's key: a file holding it as ` + "`ceph auth get-key client.USER`" + `
prints it, or a keyring (` + "`ceph auth get client.USER`" + `) with one key; "-" reads
standard input. The key is never a flag's value: flags show in the shell's
history and in the process list. The server keeps it and gives it only to
the nodes the class selects; no read returns it.

Monitors are IP:PORT (3300 speaks msgr2, 6789 msgr1), no host names: each
node would resolve a name on its own. The user needs
mon 'profile rbd' and osd 'profile rbd pool=POOL' (docs/storage.md).`,
		Example: `  ceph auth get-key client.virtplane > virtplane.key
  virtplane-agent storageclass create rbd ceph \
    --monitor 10.0.0.1:3300 --monitor 10.0.0.2:3300 --pool vms --user virtplane \
    --key-file virtplane.key --node-selector example.com/ceph=true
  ceph auth get-key client.virtplane | virtplane-agent storageclass create rbd ceph \
    --monitor 10.0.0.1:3300 --pool vms --user virtplane --key-file -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readCephxKey(cmd.InOrStdin(), cmd.ErrOrStderr(), keyFile)
			if err != nil {
				return err
			}
			sc := f.class(args[0], &apiv1.StorageClassSpec{
				Rbd: &apiv1.RBDStorage{Monitors: monitors, Pool: pool, User: user, Key: key},
			})
			return createStorageClass(cmd, root, sc)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&monitors, "monitor", nil, "a monitor's address, IP:PORT (repeatable, or comma-separated)")
	fl.StringVar(&pool, "pool", "", "the Ceph pool volumes live in")
	fl.StringVar(&user, "user", "", `the cephx user, without "client."`)
	fl.StringVar(&keyFile, "key-file", "", `file holding the user's key, or a keyring with one key; "-" reads standard input`)
	f.add(cmd)
	for _, req := range []string{"monitor", "pool", "user", "key-file"} {
		_ = cmd.MarkFlagRequired(req)
	}
	return cmd
}

func newStorageClassCreateSharedCommand(root *rootOptions) *cobra.Command {
	var (
		f    storageClassFlags
		path string
	)
	cmd := &cobra.Command{
		Use:     "shared-filesystem NAME --path /MOUNT/POINT",
		Aliases: []string{"shared_filesystem"},
		Short:   "Create a storage class on a filesystem mounted at the same path on every node it selects",
		Long: `Create a storage class whose volumes are qcow2 files under PATH/virtplane, a
filesystem (NFS, CephFS, ...) the operator mounts at PATH on every node the
class selects. virtplane does not mount it: a node where PATH is not a
writable directory reports the class not ready.`,
		Example: `  virtplane-agent storageclass create shared-filesystem nfs --path /mnt/vms \
    --node-selector example.com/nfs=true`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc := f.class(args[0], &apiv1.StorageClassSpec{SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: path}})
			return createStorageClass(cmd, root, sc)
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "the absolute path the filesystem is mounted at on every node")
	f.add(cmd)
	_ = cmd.MarkFlagRequired("path")
	return cmd
}

func createStorageClass(cmd *cobra.Command, root *rootOptions, sc *apiv1.StorageClass) error {
	ctx, name := cmd.Context(), sc.GetMetadata().GetName()
	return root.withClient(ctx, func(c *client.Client) error {
		if _, err := c.StorageClasses.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: sc}); err != nil {
			return describeError(err, storageClassResource, name)
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "storageclass/%s created\n", name)
		return err
	})
}

// maxKeyFile bounds what is read of a key file: a keyring of a few users
// is well under it.
const maxKeyFile = 64 << 10

// keyringKey is a key line of a Ceph keyring ("key = AQ...==").
var keyringKey = regexp.MustCompile(`^\s*key\s*=\s*(\S+)\s*$`)

// readCephxKey reads a cephx key from file ("-": stdin): the key alone
// (surrounding blanks dropped), or a keyring holding exactly one key. Its
// errors never quote the file's content, which may be the key. A file
// others may read gets a warning on errOut: the key is the cluster's
// access for this user.
func readCephxKey(stdin io.Reader, errOut io.Writer, file string) (string, error) {
	name := file
	var data []byte
	var err error
	if file == "-" {
		name = "standard input"
		data, err = io.ReadAll(io.LimitReader(stdin, maxKeyFile+1))
	} else {
		data, err = readKeyFile(file, errOut)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("read the key: %w", err)
	case len(data) > maxKeyFile:
		return "", fmt.Errorf("%s holds more than %d KiB: not a cephx key nor a keyring", name, maxKeyFile>>10)
	}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := keyringKey.FindStringSubmatch(sc.Text()); m != nil {
			keys = append(keys, m[1])
		}
	}
	switch trimmed := strings.TrimSpace(string(data)); {
	case len(keys) == 1:
		return keys[0], nil
	case len(keys) > 1:
		return "", fmt.Errorf("%s is a keyring of %d keys: give a file with the one user's key (ceph auth get-key client.USER)", name, len(keys))
	case trimmed == "":
		return "", fmt.Errorf("%s holds no key", name)
	case strings.ContainsAny(trimmed, " \t\r\n"):
		return "", fmt.Errorf("%s is neither a cephx key alone nor a keyring with a key line", name)
	default:
		// Its shape is the server's to check (validation), which never
		// echoes it.
		return trimmed, nil
	}
}

// readKeyFile reads file, warning on errOut when others than its owner
// may read it.
func readKeyFile(file string, errOut io.Writer) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() && fi.Mode()&os.ModeNamedPipe == 0 {
		return nil, errors.New(file + " is not a regular file")
	}
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(errOut, "warning: %s may be read by others than its owner (mode %04o): chmod 600 it\n", file, fi.Mode().Perm())
	}
	return io.ReadAll(io.LimitReader(f, maxKeyFile+1))
}
