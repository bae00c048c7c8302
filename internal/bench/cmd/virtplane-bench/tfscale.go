package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

var tfscaleCfg struct{ n, repeat, nodes int }

var tfscaleBench = &measurement{
	name: "tfscale", id: "5-tfscale", title: "5. Terraform at scale: plan and no-op apply with N VMs in state",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&tfscaleCfg.n, "n", 100, "VMs in the state")
		fs.IntVar(&tfscaleCfg.repeat, "repeat", byMode(full, 3, 5), "plans and no-op applies timed")
		fs.IntVar(&tfscaleCfg.nodes, "fake-nodes", 3, "fake nodes running the VMs")
		return func() string {
			return fmt.Sprintf("-n %d -repeat %d -fake-nodes %d", tfscaleCfg.n, tfscaleCfg.repeat, tfscaleCfg.nodes)
		}
	},
	run: runTFScale,
}

func runTFScale(ctx context.Context, e *env, s *bench.Section) error {
	cfg := tfscaleCfg
	ns := e.prefix + "-tf"
	dir := filepath.Join(e.work, "tfscale")
	s.Setup = []string{
		fmt.Sprintf("`serve --role server` and %d `internal/fakenode` nodes in the benchmark process (no guest runs; the fake nodes report every VMI Running at once). One `virtplane_virtual_machine` resource with `count = %d` (%s, run strategy Always, termination grace 0).", cfg.nodes, cfg.n, densityMemory),
		"terraform with the provider from `bin/` through a dev_overrides CLI configuration of the run's own (TF_CLI_CONFIG_FILE); default parallelism (10); wall time of the terraform process.",
		"`terraform plan -detailed-exitcode` refreshes every VM (one API read each) and must find no change; the no-op `terraform apply -auto-approve` refreshes and applies nothing.",
	}
	a, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(dir, "agent"), Role: bench.RoleServer})
	if err != nil {
		return err
	}
	defer func() { _ = a.Kill() }()
	stop, err := startFakeNodes(ctx, "unix://"+a.Socket, ns, cfg.nodes)
	if err != nil {
		return err
	}
	defer stop()
	tf, err := bench.NewTerraform(filepath.Join(dir, "tf"), e.binDir)
	if err != nil {
		return err
	}
	hcl := providerBlock(a.Socket) + fmt.Sprintf(`
resource "virtplane_virtual_machine" "vm" {
  count                    = %d
  name                     = format("vm-%%05d", count.index)
  namespace                = %q
  memory                   = %q
  termination_grace_period = 0
}
`, cfg.n, ns, densityMemory)
	if err := tf.WriteConfig(hcl); err != nil {
		return err
	}
	create, _, err := tf.Run(ctx, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		return err
	}
	// Each command is timed with the CPU terraform and its provider used
	// and the CPU the agent used meanwhile.
	type runs struct{ wall, cpu, provider, agent []time.Duration }
	timed := func(r *runs, t *bench.Terraform, args ...string) error {
		a0, err := procfs.CPUSeconds(a.Pid())
		if err != nil {
			return err
		}
		u, _, err := t.RunCPU(ctx, args...)
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 2 {
				return fmt.Errorf("plan after apply is not empty: %w", err)
			}
			return err
		}
		a1, err := procfs.CPUSeconds(a.Pid())
		if err != nil {
			return err
		}
		r.wall, r.cpu, r.provider = append(r.wall, u.Wall), append(r.cpu, u.CPU-u.ProviderCPU), append(r.provider, u.ProviderCPU)
		r.agent = append(r.agent, time.Duration((a1-a0)*float64(time.Second)))
		return nil
	}
	var plans, noRefresh, applies, floor runs
	for range cfg.repeat {
		if err := timed(&plans, tf, "plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
			return err
		}
		if err := timed(&noRefresh, tf, "plan", "-refresh=false", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
			return err
		}
		if err := timed(&applies, tf, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
			return err
		}
	}
	// terraform's own floor: a plan with no resources at all.
	empty, err := bench.NewTerraform(filepath.Join(dir, "tf-empty"), e.binDir)
	if err != nil {
		return err
	}
	if err := empty.WriteConfig(providerBlock(a.Socket)); err != nil {
		return err
	}
	for range cfg.repeat {
		if err := timed(&floor, empty, "plan", "-input=false", "-no-color"); err != nil {
			return err
		}
	}
	s.NewTable(fmt.Sprintf("terraform with %d VMs in the state (medians; wall time of the terraform process)", cfg.n), "Command", "Wall", "Wall min–max", "CPU terraform", "CPU provider", "CPU agent", "n")
	s.AddRow(fmt.Sprintf("`terraform apply` creating the %d VMs (waits for each to run)", cfg.n), bench.Secs(create), "", "", "", "", "1")
	for _, r := range []struct {
		what string
		r    runs
	}{
		{"`terraform plan` (refresh, no changes)", plans},
		{"`terraform plan -refresh=false`", noRefresh},
		{"`terraform apply` (refresh, nothing to do)", applies},
		{"`terraform plan` of a configuration without resources (terraform's own floor)", floor},
	} {
		s.AddRow(r.what, bench.Secs(bench.Median(r.r.wall)), bench.Secs(bench.MinDuration(r.r.wall))+"–"+bench.Secs(bench.MaxDuration(r.r.wall)),
			bench.Secs(bench.Median(r.r.cpu)), bench.Secs(bench.Median(r.r.provider)), bench.Secs(bench.Median(r.r.agent)), fmt.Sprint(len(r.r.wall)))
	}
	plan := bench.Median(plans.wall)
	s.Target(fmt.Sprintf("`terraform plan` with %d VMs", cfg.n), "≤ 3 s", bench.Secs(plan), plan <= 3*time.Second)
	if plan > 3*time.Second {
		s.Note("Target missed: the CPU columns say where the time goes. The agent used %s of CPU per plan, so no agent profile was taken (it would show idle); terraform and the provider plugin used %s and %s, on %d cores shared with the host's other load.",
			bench.Secs(bench.Median(plans.agent)), bench.Secs(bench.Median(plans.cpu)), bench.Secs(bench.Median(plans.provider)), runtime.NumCPU())
	}
	s.Note("terraform %s.", bench.TerraformVersion(ctx))
	return nil
}
