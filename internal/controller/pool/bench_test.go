package pool

import (
	"context"
	"testing"
)

// BenchmarkSteadyPass is one pass over a settled pool of 1000 running
// VMs: what every instance event of the pool costs.
func BenchmarkSteadyPass(b *testing.B) {
	p := newPool(1000)
	f := newFixture(b, p, poolVMs(p, 1000)...)
	f.runAll(b, true)
	f.settle(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.c.Reconcile(ctx, poolKey0); err != nil {
			b.Fatal(err)
		}
	}
}
