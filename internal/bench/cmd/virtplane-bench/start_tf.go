package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// providerBlock is the terraform and provider blocks for an agent socket.
func providerBlock(socket string) string {
	return `terraform {
  required_providers {
    virtplane = {
      source = "virtplane/virtplane"
    }
  }
}

provider "virtplane" {
  endpoint = ` + strconv.Quote("unix://"+socket) + `
}
`
}

// startTerraform times `terraform apply` of one VM, start to finish of the
// terraform process, alternating with raw starts of the same domain.
func startTerraform(ctx context.Context, st *starter, a *bench.Agent, s *bench.Section) error {
	tf, err := bench.NewTerraform(filepath.Join(st.dir, "tf"), st.e.binDir)
	if err != nil {
		return err
	}
	hcl := providerBlock(a.Socket) + fmt.Sprintf(`
resource "virtplane_virtual_machine" "vm" {
  name                     = "tf-vm"
  namespace                = %q
  memory                   = %q
  termination_grace_period = 0

  cpu {
    cores = 1
  }

  boot {
    kernel  = %q
    initrd  = %q
    cmdline = %q
  }
}
`, st.ns, guestMemory, st.e.kernel, st.e.initrd, testguest.Cmdline(testguest.Hostname("bench")))
	if err := tf.WriteConfig(hcl); err != nil {
		return err
	}
	apply := []string{"apply", "-auto-approve", "-input=false", "-no-color"}
	destroy := []string{"destroy", "-auto-approve", "-input=false", "-no-color"}
	// Warm-up, not counted: the first run pays for loading terraform and
	// the provider from disk.
	if _, _, err := tf.Run(ctx, apply...); err != nil {
		return err
	}
	if _, _, err := tf.Run(ctx, destroy...); err != nil {
		return err
	}
	var applies, destroys, raw []time.Duration
	for i := range startCfg.tf {
		d, _, err := tf.Run(ctx, apply...)
		if err != nil {
			return err
		}
		dd, _, err := tf.Run(ctx, destroy...)
		if err != nil {
			return err
		}
		r, err := st.startRaw()
		if err != nil {
			return err
		}
		applies, destroys, raw = append(applies, d), append(destroys, dd), append(raw, r)
		st.e.log.Info("terraform start", "i", i, "apply", d, "destroy", dd, "raw", r)
	}
	s.NewTable("terraform apply of one VM, start to finish of the terraform process (same VM, alternating with raw starts)", "Path", "Median", "Min", "Max", "n")
	for _, r := range []struct {
		what string
		ds   []time.Duration
	}{
		{"`terraform apply -auto-approve` (create, wait Running)", applies},
		{"raw libvirt: define + start", raw},
		{"`terraform destroy -auto-approve` (for reference)", destroys},
	} {
		s.AddRow(r.what, bench.Secs(bench.Median(r.ds)), bench.Secs(bench.MinDuration(r.ds)), bench.Secs(bench.MaxDuration(r.ds)), fmt.Sprint(len(r.ds)))
	}
	s.AddRow("terraform apply vs raw (medians)", "difference "+bench.Secs(bench.Median(applies)-bench.Median(raw)), "ratio "+bench.Ratio(bench.Median(applies), bench.Median(raw)), "", "")
	s.Note("terraform %s with the provider from `bin/` through a dev_overrides CLI configuration of the run's own (TF_CLI_CONFIG_FILE), so no init or registry; the provider block points at the agent's unix socket.", bench.TerraformVersion(ctx))
	return nil
}
