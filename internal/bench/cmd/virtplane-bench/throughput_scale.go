package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
)

// scaleResult is what a fake-node run measures once all VMs run: the
// store's size and how long reads take at that size.
type scaleResult struct {
	dbFile               int64 // bytes of <data-dir>/etcd/member/snap/db
	dbSize, dbInUse      int64 // maintenance Status before compaction
	dbCompacted          int64 // dbSizeInUse after compacting to the current revision
	cliList, cliGet      time.Duration
	tfData, tfFloor      time.Duration
	listed               int // rows `get vm -A` printed (a check that it listed them all)
	cpuProfile, heapProf string
}

// measureScale reads the store's size and times the reads users make at
// this size: the CLI's list of all VMs (in pages of 500) and get of one,
// and terraform reading one VM through the data source. Medians of runs
// executions each.
func measureScale(ctx context.Context, e *env, a *bench.Agent, etcd *bench.Etcd, ns string, n, runs int) (scaleResult, error) {
	var r scaleResult
	if st, err := os.Stat(filepath.Join(a.DataDir, etcdserver.DirName, "member", "snap", "db")); err == nil {
		r.dbFile = st.Size()
	}
	var err error
	if r.dbSize, r.dbInUse, err = etcd.DBSize(ctx); err != nil {
		return r, err
	}
	endpoint := "unix://" + a.Socket
	cli := func(args ...string) (time.Duration, int, error) {
		cmd := exec.CommandContext(ctx, e.agent, append([]string{"--endpoint", endpoint}, args...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		t0 := time.Now()
		err := cmd.Run()
		took := time.Since(t0)
		if err != nil {
			return 0, 0, fmt.Errorf("virtplane-agent %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return took, bytes.Count(out.Bytes(), []byte("\n")), nil
	}
	var lists, gets []time.Duration
	for range runs {
		took, lines, err := cli("get", "vm", "-A")
		if err != nil {
			return r, err
		}
		lists, r.listed = append(lists, took), lines-1 // the header
		if took, _, err = cli("get", "vm", bench.VMName(n/2), "-n", ns); err != nil {
			return r, err
		}
		gets = append(gets, took)
	}
	r.cliList, r.cliGet = bench.Median(lists), bench.Median(gets)

	dir := filepath.Join(e.work, fmt.Sprintf("tp-tf-%d", n))
	tf, err := bench.NewTerraform(filepath.Join(dir, "data"), e.binDir)
	if err != nil {
		return r, err
	}
	hcl := providerBlock(a.Socket) + fmt.Sprintf(`
data "virtplane_virtual_machine" "one" {
  name      = %q
  namespace = %q
}

output "uid" {
  value = data.virtplane_virtual_machine.one.uid
}
`, bench.VMName(n/2), ns)
	if err := tf.WriteConfig(hcl); err != nil {
		return r, err
	}
	floor, err := bench.NewTerraform(filepath.Join(dir, "floor"), e.binDir)
	if err != nil {
		return r, err
	}
	if err := floor.WriteConfig(providerBlock(a.Socket)); err != nil {
		return r, err
	}
	var datas, floors []time.Duration
	for range runs {
		took, _, err := tf.Run(ctx, "plan", "-input=false", "-no-color")
		if err != nil {
			return r, err
		}
		datas = append(datas, took)
		if took, _, err = floor.Run(ctx, "plan", "-input=false", "-no-color"); err != nil {
			return r, err
		}
		floors = append(floors, took)
	}
	r.tfData, r.tfFloor = bench.Median(datas), bench.Median(floors)

	if err := etcd.Compact(ctx); err != nil {
		return r, err
	}
	if _, r.dbCompacted, err = etcd.DBSize(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// agentProfile saves the agent's /debug/pprof/<name> (served with
// --pprof) into the profiles directory and returns the file.
func agentProfile(ctx context.Context, e *env, a *bench.Agent, name, query, file string) (string, error) {
	if err := os.MkdirAll(e.profiles, 0o755); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.MetricsAddr+"/debug/pprof/"+name+query, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("agent profile %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("agent profile %s: %s", name, resp.Status)
	}
	path := filepath.Join(e.profiles, file)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", fmt.Errorf("agent profile %s: %w", name, err)
	}
	return path, f.Close()
}

// addScaleTable adds the store size and read latency of each fake size,
// and the targets of the largest.
func addScaleTable(s *bench.Section, results []tpResult, runs int) {
	var rows []tpResult
	for _, r := range results {
		if r.scale != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	s.NewTable(fmt.Sprintf("At each size, all Running: etcd and reads (medians of %d)", runs), "N", "etcd db file", "dbSize", "dbSizeInUse", "dbSizeInUse after compaction", "`get vm -A` (all, pages of 500)", "`get vm NAME`", "terraform plan reading `data.virtplane_virtual_machine`", "terraform plan, no resources (floor)")
	for _, r := range rows {
		x := r.scale
		s.AddRow(fmt.Sprint(r.n), bench.MiB(x.dbFile/1024), bench.MiB(x.dbSize/1024), bench.MiB(x.dbInUse/1024), bench.MiB(x.dbCompacted/1024),
			bench.Secs(x.cliList), bench.Secs(x.cliGet), bench.Secs(x.tfData), bench.Secs(x.tfFloor))
		if x.listed != r.n {
			s.Note("N=%d: `get vm -A` printed %d rows, not %d.", r.n, x.listed, r.n)
		}
		for _, p := range []string{x.cpuProfile, x.heapProf} {
			if p != "" {
				s.Profiles = append(s.Profiles, p)
			}
		}
	}
	s.Note("etcd sizes: the member's db file, and the maintenance Status (`dbSize`, `dbSizeInUse`) over `<data-dir>/etcd/etcd.sock`; the agent compacts every --etcd-compaction (10 min by default), which a run does not reach, so the benchmark compacts to the current revision itself after the reads (no defragmentation: the file keeps its size, the pages in use shrink). Reads: the `virtplane-agent` CLI exec'd against the agent's socket (a VM in the middle of the namespace for get), and `terraform plan` of a configuration with only the data source (wall time of the process; the floor is the same provider block without it).")
	big := results[len(results)-1]
	if big.n >= 100000 {
		s.Target(fmt.Sprintf("%d VMs Running (fake nodes)", big.n), "≤ 5 min", bench.Secs(big.vms), big.vms <= 5*time.Minute)
		s.Target(fmt.Sprintf("agent peak RSS at %d VMs", big.n), "≤ 2 GiB", bench.MiB(big.agentHWM), big.agentHWM <= 2<<20)
		wpv := big.writes.Writes.VMAndVMI() / float64(big.n)
		s.Target(fmt.Sprintf("store writes per VM at %d VMs", big.n), "≤ 6", fmt.Sprintf("%.2f", wpv), wpv <= 6)
	}
}
