package e2e

import (
	"sort"
	"strconv"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"k8s.io/apimachinery/pkg/api/resource"
)

// measureMemory reports, for the booted idle guests vms, what a VM costs
// on the host beyond its guest: the launcher's RSS, and QEMU's RSS less
// the guest RAM the guest touched.
func measureMemory(t *testing.T, vms map[string]*running) {
	t.Helper()
	q := resource.MustParse(guestMemory)
	guestKiB := q.Value() / 1024
	var names []string
	for n := range vms {
		names = append(names, n)
	}
	sort.Strings(names)
	var lRSS, lAnon, qRSS, gTouched, gMap, nonGuest, nonGuestAnon, qFile []int64
	for _, n := range names {
		r := vms[n]
		l, err := procfs.ProcStatus(r.launcher, "VmRSS", "RssAnon")
		if err != nil {
			t.Fatalf("launcher of %s: %v", n, err)
		}
		q, err := procfs.ProcStatus(r.qemu, "VmRSS", "RssAnon", "RssFile", "RssShmem")
		if err != nil {
			t.Fatalf("QEMU of %s: %v", n, err)
		}
		size, touched, err := procfs.GuestRAM(r.qemu, guestKiB)
		if err != nil {
			t.Fatalf("QEMU of %s: %v", n, err)
		}
		t.Logf("%s: launcher pid %d VmRSS %d kB RssAnon %d kB; QEMU pid %d VmRSS %d kB (RssAnon %d, RssFile %d, RssShmem %d), guest RAM mapping %d kB with %d kB resident, non-guest %d kB",
			n, r.launcher, l["VmRSS"], l["RssAnon"], r.qemu, q["VmRSS"], q["RssAnon"], q["RssFile"], q["RssShmem"], size, touched, q["VmRSS"]-touched)
		lRSS, lAnon = append(lRSS, l["VmRSS"]), append(lAnon, l["RssAnon"])
		qRSS, gTouched, gMap = append(qRSS, q["VmRSS"]), append(gTouched, touched), append(gMap, size)
		// Guest RAM is anonymous memory: what is left of RssAnon is
		// QEMU's own private memory (TCG translation cache, device state,
		// heap), while RssFile is mostly the binary and libraries that
		// all QEMUs share.
		nonGuest = append(nonGuest, q["VmRSS"]-touched)
		nonGuestAnon = append(nonGuestAnon, q["RssAnon"]-touched)
		qFile = append(qFile, q["RssFile"])
	}
	report(t, "memory per VM (%d idle test guests, TCG, %s guest RAM, 1 vCPU; MiB, mean [min-max]): "+
		"launcher VmRSS %s, RssAnon %s; QEMU VmRSS %s of which guest RAM touched %s (mapping %s), "+
		"QEMU non-guest %s (private: RssAnon - guest %s; RssFile %s). "+
		"Method: VmRSS/RssAnon/RssFile from /proc/<pid>/status; guest RAM touched = Rss of QEMU's guest-RAM mapping "+
		"(the smallest anonymous mapping of at least the guest size) in /proc/<qemu>/smaps; non-guest = QEMU VmRSS - that",
		len(names), guestMemory, mib(lRSS), mib(lAnon), mib(qRSS), mib(gTouched), mib(gMap), mib(nonGuest), mib(nonGuestAnon), mib(qFile))
}

// mib renders kB figures as "mean [min-max]" MiB.
func mib(kb []int64) string {
	if len(kb) == 0 {
		return "-"
	}
	lo, hi, sum := kb[0], kb[0], int64(0)
	for _, v := range kb {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	f := func(v int64) string { return strconv.FormatFloat(float64(v)/1024, 'f', 1, 64) }
	return f(sum/int64(len(kb))) + " [" + f(lo) + "-" + f(hi) + "]"
}
