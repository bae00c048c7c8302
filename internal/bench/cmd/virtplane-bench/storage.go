package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

var storageCfg struct{ n, largeMiB, diskMiB, fillMiB, hops int }

var storageBench = &measurement{
	name: "storage", id: "8-storage", title: "8. Storage: volumes from images and live migration, rbd against local",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&storageCfg.n, "n", byMode(full, 3, 5), "starts of each class and image (after the first from each image on rbd, which imports it); odd, so that one slow start does not move the median")
		fs.IntVar(&storageCfg.largeMiB, "large-mib", 2048, "the large image's size in MiB, every byte written")
		fs.IntVar(&storageCfg.diskMiB, "disk-mib", 4096, "the migrated VMs' volume size in MiB")
		fs.IntVar(&storageCfg.fillMiB, "fill-mib", byMode(full, 1024, 4096), "MiB of data in the migrated volumes (written into the image they are made from); 0 skips the migrations")
		fs.IntVar(&storageCfg.hops, "hops", byMode(full, 2, 4), "live migrations of each VM, directions alternating")
		return func() string {
			return fmt.Sprintf("-n %d -large-mib %d -disk-mib %d -fill-mib %d -hops %d",
				storageCfg.n, storageCfg.largeMiB, storageCfg.diskMiB, storageCfg.fillMiB, storageCfg.hops)
		}
	},
	run: runStorage,
}

// storageClass is the rbd class the benchmark makes on its cluster.
const storageClass = "bench-rbd"

// storEnv is the migration benchmark's two hosts and cluster with a Ceph
// cluster in their hub and an rbd class on it.
type storEnv struct {
	*migEnv
}

func runStorage(ctx context.Context, e *env, s *bench.Section) (err error) {
	if reason := ceph.Unavailable(); reason != "" {
		return errors.New(reason)
	}
	began := time.Now()
	// The server runs in the host's namespace and does the class's
	// metadata work: it reaches the hub by the host link.
	m, err := startMigEnvWith(ctx, e, "stor", multinode.Options{NamePrefix: e.prefix, HostLink: true}, func(m *migEnv) (err error) {
		m.ceph, err = ceph.StartInHub(ctx, m.hosts.Hub(), slogLogf{e.log})
		return err
	})
	if err != nil {
		return err // startMigEnvWith closed what it started
	}
	defer func() {
		if cerr := m.close(); cerr != nil {
			e.log.Warn("storage teardown", "err", cerr)
			if err == nil {
				err = cerr
			}
		}
	}()
	st := &storEnv{migEnv: m}
	if err := st.makeClass(ctx); err != nil {
		return err
	}
	s.Setup = []string{
		fmt.Sprintf("Two private libvirt hosts (%s, %s) as in section 7, a server and a node agent per host; a Ceph cluster from Debian's packages in their hub namespace (internal/testutil/ceph: one ceph-mon, one BlueStore ceph-osd on a sparse file, no ceph-mgr, pool size 1), reached by QEMU and the node agents over the hosts' veths and by the server over a host link; up in %s with the hosts and the cluster.",
			m.a.Name, m.b.Name, time.Since(began).Round(100*time.Millisecond)),
		fmt.Sprintf("Storage class %s: kind rbd on the cluster's pool, a cephx user of its own (`profile rbd`); `local` is the built-in class (qcow2 files in the node's VM directory).", storageClass),
	}
	ceph0 := st.cephCost()
	if err := st.createFromImage(ctx, s); err != nil {
		return err
	}
	ceph1 := st.cephCost()
	var ceph2 cephCost
	if storageCfg.fillMiB > 0 {
		if err := st.migrations(ctx, s); err != nil {
			return err
		}
		ceph2 = st.cephCost()
	}
	s.NewTable("What the Ceph cluster cost (this run; the OSD's BlueStore file is sparse and grows with what is written)", "When", "OSD VmRSS", "mon VmRSS", "OSD block file allocated")
	s.AddRow("cluster up", bench.MiB(ceph0.osdKiB), bench.MiB(ceph0.monKiB), bench.MiB(ceph0.blockKiB))
	s.AddRow("after the volumes from images (both images imported; the VMs deleted)", bench.MiB(ceph1.osdKiB), bench.MiB(ceph1.monKiB), bench.MiB(ceph1.blockKiB))
	if storageCfg.fillMiB > 0 {
		s.AddRow(fmt.Sprintf("after the migrations (%d MiB more imported)", storageCfg.fillMiB), bench.MiB(ceph2.osdKiB), bench.MiB(ceph2.monKiB), bench.MiB(ceph2.blockKiB))
	}
	return nil
}

// makeClass makes the rbd class with a user of its own and waits until
// the server and both nodes reach it.
func (st *storEnv) makeClass(ctx context.Context) error {
	api := st.c.API
	key, err := st.ceph.CreateUser(ctx, "bench", "mon", "profile rbd", "osd", "profile rbd pool="+st.ceph.Pool())
	if err != nil {
		return err
	}
	if _, err := api.StorageClasses.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: storageClass},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
			Monitors: st.ceph.Monitors(), Pool: st.ceph.Pool(), User: "bench", Key: strings.TrimSpace(key),
		}},
	}}); err != nil {
		return fmt.Errorf("creating storage class %s: %w", storageClass, err)
	}
	if err := waitUntil(ctx, time.Minute, "storage class "+storageClass+" ready", func() bool {
		sc, err := api.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: storageClass})
		return err == nil && apiv1.IsConditionTrue(sc.GetStatus().GetConditions(), apiv1.ConditionReady)
	}); err != nil {
		return err
	}
	for _, n := range []*cluster.Node{st.a, st.b} {
		if err := waitUntil(ctx, time.Minute, n.Name+" reaching storage class "+storageClass, func() bool {
			node, err := api.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: n.Name})
			if err != nil {
				return false
			}
			for _, s := range node.GetStatus().GetStorage() {
				if s.GetClass() == storageClass {
					return s.GetReady()
				}
			}
			return false
		}); err != nil {
			return err
		}
	}
	return nil
}

// nodeImage waits until node n lists image name with its checksum (the
// node agent hashes a new image once; the checksum names the pool's base)
// and returns what it lists.
func (st *storEnv) nodeImage(ctx context.Context, n *cluster.Node, name string) (*apiv1.NodeImage, error) {
	var img *apiv1.NodeImage
	err := waitUntil(ctx, 3*time.Minute, n.Name+" listing image "+name, func() bool {
		node, err := st.c.API.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: n.Name})
		if err != nil {
			return false
		}
		for _, i := range node.GetStatus().GetImages() {
			if i.GetName() == name && i.GetSha256() != "" {
				img = i
				return true
			}
		}
		return false
	})
	return img, err
}

// cephCost is what the cluster's daemons hold (KiB).
type cephCost struct{ osdKiB, monKiB, blockKiB int64 }

func (st *storEnv) cephCost() cephCost {
	mon, osd := st.ceph.Pids()
	rss := func(pid int) int64 {
		v, err := procfs.ProcStatus(pid, "VmRSS")
		if err != nil {
			return 0
		}
		return v["VmRSS"]
	}
	c := cephCost{osdKiB: rss(osd), monKiB: rss(mon)}
	blocks, _ := filepath.Glob(filepath.Join(filepath.Dir(st.ceph.Conf()), "osd", "ceph-*", "block"))
	for _, b := range blocks {
		var sys syscall.Stat_t
		if err := syscall.Stat(b, &sys); err == nil {
			c.blockKiB += sys.Blocks / 2
		}
	}
	return c
}

// copyFile copies src to dst (0644).
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
