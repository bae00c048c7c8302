package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

// ProviderAddress is the provider's registry address.
const ProviderAddress = "registry.terraform.io/virtplane/virtplane"

// Terraform runs the terraform CLI in a working directory of its own with
// a CLI configuration of its own: dev_overrides point the provider at the
// freshly built binary, so no init, registry or lock file is involved.
type Terraform struct {
	Bin       string // terraform on PATH when empty
	Dir       string
	CLIConfig string
}

// NewTerraform prepares dir with a CLI configuration whose dev_overrides
// serve the provider from pluginDir (where terraform-provider-virtplane
// is).
func NewTerraform(dir, pluginDir string) (*Terraform, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(pluginDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, "terraform-provider-virtplane")); err != nil {
		return nil, fmt.Errorf("provider binary: %w (run make build)", err)
	}
	cfg := filepath.Join(dir, "terraformrc")
	text := "disable_checkpoint = true\n\nprovider_installation {\n  dev_overrides {\n    " +
		strconv.Quote(ProviderAddress) + " = " + strconv.Quote(abs) + "\n  }\n  direct {}\n}\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("terraform")
	if err != nil {
		return nil, fmt.Errorf("terraform is not on PATH: %w", err)
	}
	return &Terraform{Bin: bin, Dir: dir, CLIConfig: cfg}, nil
}

// WriteConfig writes main.tf.
func (t *Terraform) WriteConfig(hcl string) error {
	return os.WriteFile(filepath.Join(t.Dir, "main.tf"), []byte(hcl), 0o644)
}

// Run runs terraform with args and returns how long it took, start to
// finish of the process. Exit code 2 of `plan -detailed-exitcode` (changes
// present) is returned as an error like any failure.
func (t *Terraform) Run(ctx context.Context, args ...string) (time.Duration, string, error) {
	r, out, err := t.RunCPU(ctx, args...)
	return r.Wall, out, err
}

// Usage is what one terraform run took.
type Usage struct {
	Wall time.Duration
	// CPU is user + system time of terraform and of the children it
	// waited for (the provider plugin).
	CPU time.Duration
	// ProviderCPU is the provider plugin's share of CPU, sampled from
	// /proc every 50 ms while it ran (so a little low).
	ProviderCPU time.Duration
}

// RunCPU is Run, also reporting CPU time.
func (t *Terraform) RunCPU(ctx context.Context, args ...string) (Usage, string, error) {
	cmd := exec.CommandContext(ctx, t.Bin, args...)
	cmd.Dir = t.Dir
	cmd.Env = append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+t.CLIConfig,
		"TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1",
		"TF_INPUT=0",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Usage{}, "", fmt.Errorf("terraform %s: %w", strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	provider := make(chan time.Duration, 1)
	go func() { provider <- sampleProviderCPU(cmd.Process.Pid, done) }()
	err := cmd.Wait()
	close(done)
	u := Usage{Wall: time.Since(start), ProviderCPU: <-provider}
	if ps := cmd.ProcessState; ps != nil {
		u.CPU = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		return u, out.String(), fmt.Errorf("terraform %s: %w\n%s", strings.Join(args, " "), err, lastLines(out.String(), 30))
	}
	return u, out.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TerraformVersion is the terraform CLI's version ("1.11.4"), "" when it
// cannot be read.
func TerraformVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "terraform", "version", "-json").Output()
	if err != nil {
		return ""
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if json.Unmarshal(out, &v) != nil {
		return ""
	}
	return v.Version
}

// sampleProviderCPU follows the CPU time of pid's provider plugin children
// until done, and returns the last reading summed over them.
func sampleProviderCPU(pid int, done <-chan struct{}) time.Duration {
	last := map[int]float64{}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		for _, c := range procfs.ChildPids(pid) {
			if !strings.HasPrefix(procfs.Comm(c), "terraform-provi") {
				continue
			}
			if v, err := procfs.CPUSeconds(c); err == nil {
				last[c] = v
			}
		}
		select {
		case <-done:
			var sum float64
			for _, v := range last {
				sum += v
			}
			return time.Duration(sum * float64(time.Second))
		case <-t.C:
		}
	}
}
