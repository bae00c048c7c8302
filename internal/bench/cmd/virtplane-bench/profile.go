package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// profileControlPlane repeats a fake-node throughput run with the server
// role in this process, under the Go profiler: the agent serves no pprof
// endpoint (its metrics listener has /metrics and /healthz only), and its
// code is not to be changed for a benchmark. The server is the same code
// (agent/server.Start with role server); the fake nodes and the client
// share the process and show up in the profile under their own
// functions (internal/fakenode, grpc client side). It writes CPU and heap
// profiles and `go tool pprof -top` summaries into e.profiles.
func profileControlPlane(ctx context.Context, e *env, n, nodes, workers int) (*profileResult, error) {
	dir := filepath.Join(e.work, "profile")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(e.profiles, 0o755); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, err := server.Start(sctx, server.Options{
		Role: server.RoleServer, DataDir: filepath.Join(dir, "data"), Socket: filepath.Join(dir, "api.sock"),
		LeaderElect: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		srv.Shutdown(stopCtx)
	}()
	endpoint := "unix://" + filepath.Join(dir, "api.sock")
	ns := fmt.Sprintf("%s-prof%d", e.prefix, n)
	stopNodes, err := startFakeNodes(ctx, endpoint, ns, nodes)
	if err != nil {
		return nil, err
	}
	defer stopNodes()
	c, err := client.Dial(ctx, client.Config{Endpoint: endpoint})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tr, err := bench.NewTracker(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	vms := make([]*apiv1.VirtualMachine, n)
	for i := range vms {
		vms[i] = bench.NoOSVM(ns, bench.VMName(i), densityMemory)
	}

	base := filepath.Join(e.profiles, fmt.Sprintf("%s-throughput-%d", e.mode, n))
	cpuFile, err := os.Create(base + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	defer cpuFile.Close()
	if err := pprof.StartCPUProfile(cpuFile); err != nil {
		return nil, err
	}
	t0 := time.Now()
	err = bench.CreateAll(ctx, c, vms, workers)
	if err == nil {
		err = tr.WaitVMsRunning(ctx, n, 15*time.Minute, watchdog(e, "profile"))
	}
	took := time.Since(t0)
	pprof.StopCPUProfile()
	if err != nil {
		return nil, err
	}
	e.log.Info("profiled run", "n", n, "all_running", took)
	res := &profileResult{took: took}
	files := []string{base + ".cpu.pprof"}
	runtime.GC() // the heap profile shows live objects as of the last GC
	if err := writeProfile("heap", base+".heap.pprof"); err != nil {
		return nil, err
	}
	files = append(files, base+".heap.pprof")
	if txt, top, err := pprofTop(ctx, base+".cpu.pprof"); err == nil {
		files, res.top = append(files, txt), top
	} else {
		e.log.Warn("go tool pprof", "err", err)
	}
	for _, f := range files {
		if rel, err := filepath.Rel(mustGetwd(), f); err == nil && !strings.HasPrefix(rel, "..") {
			f = rel
		}
		res.files = append(res.files, f)
	}
	return res, nil
}

// profileResult is what a profiled run left.
type profileResult struct {
	took  time.Duration
	files []string
	top   []string // "vmi.(*Controller).candidates 64.1%": virtplane functions by cumulative CPU
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing the %s profile: %w", name, err)
	}
	return f.Close()
}

// pprofTop writes `go tool pprof -top` of a profile next to it, flat and
// cumulative, and returns virtplane's own functions with the largest
// cumulative share.
func pprofTop(ctx context.Context, profile string) (string, []string, error) {
	out := profile + ".top.txt"
	var text []byte
	var top []string
	for _, mode := range [][]string{{"-top"}, {"-top", "-cum"}} {
		args := append([]string{"tool", "pprof", "-nodecount", "60"}, mode...)
		b, err := exec.CommandContext(ctx, "go", append(args, profile)...).Output()
		if err != nil {
			return "", nil, fmt.Errorf("go tool pprof %s: %w", profile, err)
		}
		text = append(append(text, b...), '\n')
		if len(mode) == 2 {
			top = virtplaneCum(string(b), 8)
		}
	}
	return out, top, os.WriteFile(out, text, 0o644)
}

// virtplaneCum picks up to n lines of `pprof -top -cum` output that name
// this module's functions, other than the generic worker loop.
func virtplaneCum(out string, n int) []string {
	const module = "github.com/virtplane/terraform-provider-virtplane/internal/"
	var top []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[5], module) {
			continue
		}
		name := strings.TrimPrefix(strings.Join(f[5:], " "), module)
		if strings.HasPrefix(name, "controller.") {
			continue // Run, processNext: every controller's loop
		}
		top = append(top, name+" "+f[4])
		if len(top) == n {
			break
		}
	}
	return top
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}
