package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// StorageUsage reports how full the store's backend is: its size and the
// size at which it refuses every write (etcd's quota).
type StorageUsage interface {
	StorageUsage(ctx context.Context) (size, quota int64, err error)
}

// QuotaOptions tune a QuotaGuard; zero fields take the defaults.
type QuotaOptions struct {
	// Threshold is the fraction of the quota from which user writes are
	// refused; default 0.9. The rest is kept for node heartbeats, status
	// updates, leader election and deletes, which etcd would refuse too
	// once the quota is reached.
	Threshold float64
	// Interval between two reads of the usage; default 10 s.
	Interval time.Duration
	// MaxAge is how long a reading counts; default three intervals. A
	// guard that cannot read the usage any longer lets writes through: a
	// Status call that fails is no sign that etcd is full, and etcd's own
	// quota still holds.
	MaxAge time.Duration
	Logger *slog.Logger
}

// quotaGuarded are the calls a full store refuses first: users' writes
// that add or change VMs (the full method names of service_grpc.pb.go),
// replica sets' and pools' included, whose controllers then write one
// object per replica. Deletes, node registration, heartbeats and status
// updates go on: they keep the running VMs' nodes alive and free space.
var quotaGuarded = methodSet(lifecycleMethods,
	apiv1.VirtualMachines_Create_FullMethodName,
	apiv1.VirtualMachines_Update_FullMethodName,
	// A hotplug is an update of the VM's template, and adds a volume.
	apiv1.VirtualMachines_AddVolume_FullMethodName,
	apiv1.VirtualMachines_RemoveVolume_FullMethodName,
	apiv1.ReplicaSets_Create_FullMethodName,
	apiv1.ReplicaSets_Update_FullMethodName,
	apiv1.ReplicaSets_Scale_FullMethodName,
	apiv1.Pools_Create_FullMethodName,
	apiv1.Pools_Update_FullMethodName,
	apiv1.Pools_Scale_FullMethodName,
	// A snapshot adds a content and copies of a VM's disks; a restore
	// or clone may make a VM.
	apiv1.Snapshots_Create_FullMethodName,
	apiv1.Restores_Create_FullMethodName,
	apiv1.Clones_Create_FullMethodName,
	// An adoption makes a VM.
	apiv1.Adoptions_Create_FullMethodName,
)

// QuotaGuard refuses user writes while the store is nearly full, before
// etcd's quota refuses every write including the heartbeats that keep
// nodes Ready. The usage is read every Interval by Run, not per call.
type QuotaGuard struct {
	src StorageUsage
	clk clock.WithTicker
	o   QuotaOptions

	mu          sync.Mutex
	size, quota int64
	read        time.Time // when size and quota were read; zero: never
	refusing    bool      // the last reading was over the threshold
}

// NewQuotaGuard reads src on clk.
func NewQuotaGuard(src StorageUsage, clk clock.WithTicker, o QuotaOptions) *QuotaGuard {
	if o.Threshold <= 0 || o.Threshold > 1 {
		o.Threshold = 0.9
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 3 * o.Interval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &QuotaGuard{src: src, clk: clk, o: o}
}

// Run reads the usage at once and then every Interval until ctx ends.
func (g *QuotaGuard) Run(ctx context.Context) {
	t := g.clk.NewTicker(g.o.Interval)
	defer t.Stop()
	for {
		g.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (g *QuotaGuard) poll(ctx context.Context) {
	size, quota, err := g.src.StorageUsage(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.o.Logger.Warn("reading the store's usage", "err", err)
		}
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.size, g.quota, g.read = size, quota, g.clk.Now()
	over := quota > 0 && float64(size) >= g.o.Threshold*float64(quota)
	if over != g.refusing {
		if over {
			g.o.Logger.Error("store nearly full: refusing VM writes", "size", size, "quota", quota)
		} else {
			g.o.Logger.Info("store below its quota threshold again: VM writes accepted", "size", size, "quota", quota)
		}
	}
	g.refusing = over
}

// refusal is the error for a guarded call now, or nil.
func (g *QuotaGuard) refusal() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.refusing || g.clk.Since(g.read) > g.o.MaxAge {
		return nil
	}
	pct := g.size * 100 / g.quota
	return status.Errorf(codes.ResourceExhausted,
		"etcd database is %d%% of its %s quota (%s used): writes that add or change VMs are refused so that node heartbeats and status updates keep working; delete what is no longer needed, then compact and defragment etcd, see docs/operations.md",
		pct, formatBytes(g.quota), formatBytes(g.size))
}

// Unary is the guard as a gRPC unary interceptor.
func (g *QuotaGuard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if quotaGuarded[info.FullMethod] {
		if err := g.refusal(); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

// formatBytes prints n in the largest binary unit it reaches, "2 GiB",
// "1.8 GiB", "512 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for ; v >= unit && i < 4; i++ {
		v /= unit
	}
	s := fmt.Sprintf("%.1f", v)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}
