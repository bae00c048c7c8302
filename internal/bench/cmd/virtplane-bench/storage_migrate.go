package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/imagefill"
)

// rbdMigrationFactor is the target for an rbd VM's live migration against
// a diskless one's (medians, same run): both move the same guest memory
// between the same hosts; the rbd disk adds the target QEMU opening the
// image and the exclusive lock changing hands, and repeated migrations
// of one guest on this host spread by ±25 %. The same rule as
// internal/e2e's TestRBDMigrationCopiesNoDisk.
const rbdMigrationFactor = 1.5

// Names of the migrated VMs, and what they carry.
const (
	migDiskless = "mig-diskless"
	migRBD      = "mig-rbd"
	migLocal    = "mig-local"
)

// migrations measures section 8's second part: the same booted guest
// without a disk, with a volume on rbd and with one on local, migrated
// side by side.
func (st *storEnv) migrations(ctx context.Context, s *bench.Section) error {
	a := st.a
	diskBytes, fillBytes := int64(storageCfg.diskMiB)<<20, int64(storageCfg.fillMiB)<<20
	image := "fill.raw"
	began := time.Now()
	if err := imagefill.Write(filepath.Join(a.ImageDir, image), diskBytes, fillBytes); err != nil {
		return err
	}
	wrote := time.Since(began)
	if _, err := st.nodeImage(ctx, a, image); err != nil {
		return err
	}
	withVolume := func(name, class string) *apiv1.VirtualMachine {
		vm := st.guestVM(name)
		spec := vm.Spec.Template.Spec
		spec.Domain.Devices = &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}}
		spec.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{
			Size: strconv.FormatInt(diskBytes, 10), Image: image, StorageClass: class}}}
		return vm
	}
	vms := []*apiv1.VirtualMachine{st.guestVM(migDiskless), withVolume(migRBD, storageClass), withVolume(migLocal, "")}
	names := []string{migDiskless, migRBD, migLocal}
	if err := st.placeOnA(ctx, vms); err != nil {
		return err
	}
	starts := map[string]time.Duration{}
	for _, name := range names {
		vmi := st.tr.VMI(name)
		starts[name] = bench.PhaseTime(vmi, apiv1.PhaseRunning).Sub(vmi.GetMetadata().GetCreationTimestamp().AsTime())
	}

	got := map[string][]vpMigration{}
	to := st.b
	for hop := range storageCfg.hops {
		for i := range names {
			// The order turns at each hop: what one migration leaves
			// behind (the source QEMU exiting, a volume removed) weighs
			// on the next.
			name := names[(i+hop)%len(names)]
			v, err := st.migrate(ctx, name, fmt.Sprintf("%s-%02d", name, hop), to)
			if err != nil {
				return err
			}
			got[name] = append(got[name], v)
			p := v.progress()
			st.e.log.Info("storage migration", "vm", name, "to", to.Name, "wall", v.wall(), "job", v.job(), "downtime", v.downtime(),
				"disk_bytes", p.GetDiskProcessedBytes(), "memory_bytes", p.GetDataProcessedBytes()-p.GetDiskProcessedBytes())
		}
		to = st.other(to)
	}
	if err := st.deleteVMs(ctx, names); err != nil {
		return err
	}

	s.Setup = append(s.Setup,
		fmt.Sprintf("Live migration: three VMs of the test guest (%s, booted, no NIC) started on %s with %s cordoned: %s without disks; %s and %s with one virtio data disk, a %d MiB persistent volume made from the same raw image whose first %d MiB are written (the rest a hole; writing it took %s) on %s and on local. The rbd volume is a clone of the image's base in the pool (its data there since the VM's first start, which imported it); the local one is a qcow2 copy holding the %d MiB, which a migration copies (libvirt's NBD block copy of the disks that are not shared).",
			guestMemory, a.Name, st.b.Name, migDiskless, migRBD, migLocal, storageCfg.diskMiB, storageCfg.fillMiB, wrote.Round(100*time.Millisecond), storageClass, storageCfg.fillMiB),
		fmt.Sprintf("Each VM migrates %d times, A → B, B → A, ..., the three taking turns (the order turning at each hop), through the API as in section 7 (wall time: Create call → phase Succeeded seen by the watch). Job time, downtime and bytes are libvirt's completed job statistics on the source, as the migration's status carries them: disk bytes are `disk_processed`, memory bytes `data_processed` minus them.", storageCfg.hops),
	)
	s.NewTable(fmt.Sprintf("Live migration of the same guest with a %d MiB volume (%d MiB of data) on rbd, on local, and without disks (medians of %d)", storageCfg.diskMiB, storageCfg.fillMiB, storageCfg.hops),
		"VM", "Method", "Wall median", "Wall min–max", "libvirt job", "Downtime", "Disk bytes moved", "Memory bytes moved", "First start (VMI created → Running)", "n")
	walls := map[string]time.Duration{}
	var rbdDisk int64
	for _, name := range names {
		ms := got[name]
		var wall, job, down []time.Duration
		var disk, mem []int64
		for _, v := range ms {
			p := v.progress()
			wall, job, down = append(wall, v.wall()), append(job, v.job()), append(down, v.downtime())
			disk, mem = append(disk, p.GetDiskProcessedBytes()), append(mem, p.GetDataProcessedBytes()-p.GetDiskProcessedBytes())
			if name == migRBD {
				rbdDisk += p.GetDiskProcessedBytes()
			}
		}
		walls[name] = bench.Median(wall)
		method := ""
		if len(ms) > 0 {
			method = ms[0].final.GetStatus().GetMigrationState().GetMethod()
		}
		s.AddRow(name, method, bench.Secs(walls[name]), bench.Secs(bench.MinDuration(wall))+"–"+bench.Secs(bench.MaxDuration(wall)),
			bench.Secs(bench.Median(job)), bench.Secs(bench.Median(down)), byteMiB(medianInt(disk)), byteMiB(medianInt(mem)),
			bench.Secs(starts[name]), strconv.Itoa(len(ms)))
	}
	s.NewTable("Where the time goes (medians; the migrations' phase timestamps and their libvirt job's start and end, as in section 7)", "Step", migDiskless, migRBD, migLocal)
	for _, stp := range migrationSteps() {
		row := []string{stp.what}
		for _, name := range names {
			row = append(row, bench.Secs(bench.Median(stp.durations(got[name]))))
		}
		s.AddRow(row...)
	}
	d := walls[migDiskless]
	s.NewTable("Against the diskless VM (wall medians, same run)", "VM", "Wall", "Diskless", "Difference", "Ratio")
	for _, name := range []string{migRBD, migLocal} {
		s.AddRow(name, bench.Secs(walls[name]), bench.Secs(d), bench.Secs(walls[name]-d), bench.Ratio(walls[name], d))
	}
	s.Target("disk bytes moved by the rbd VM's live migrations", "0", strconv.FormatInt(rbdDisk, 10), rbdDisk == 0)
	ratio := 0.0
	if d > 0 {
		ratio = float64(walls[migRBD]) / float64(d)
	}
	s.Target("rbd VM's live migration vs the diskless one's (wall medians)", fmt.Sprintf("≤ %.1f×", rbdMigrationFactor),
		fmt.Sprintf("%s (%s vs %s)", bench.Ratio(walls[migRBD], d), bench.Secs(walls[migRBD]), bench.Secs(d)), d > 0 && ratio <= rbdMigrationFactor)
	s.Note("First starts (the three VMs created together, so the import and the copy shared the node's disk and CPUs): %s imported the image's %d MiB into the pool before cloning it, %s copied them into its qcow2; both once, before the migrations.", migRBD, storageCfg.fillMiB, migLocal)
	return nil
}

// medianInt is the median of xs (the lower middle one for an even count:
// bytes are reported as moved, not averaged).
func medianInt(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
