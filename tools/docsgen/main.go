// Command docsgen regenerates the provider documentation in docs/ without
// network access: it formats examples/, builds the provider, asks the terraform on PATH for
// the schema through a dev_overrides CLI configuration, and runs
// tfplugindocs on that schema in a staging directory. Only the pages
// tfplugindocs owns are replaced; hand-written docs/*.md stay untouched.
//
// Run it from the tools module: go run ./docsgen -root .. -tfplugindocs PATH
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	providerName    = "virtplane"
	providerAddress = "registry.terraform.io/virtplane/virtplane"
)

// managed are the docs/ entries generated from the schema. They are removed
// before copying, so that pages of deleted data sources disappear.
var managed = []string{
	"index.md", "data-sources", "resources", "ephemeral-resources",
	"functions", "actions", "list-resources",
}

func main() {
	root := flag.String("root", "..", "repository root")
	tfplugindocs := flag.String("tfplugindocs", "", "path to the pinned tfplugindocs binary (required)")
	terraform := flag.String("terraform", "terraform", "terraform CLI used to export the schema")
	keep := flag.Bool("keep", false, "keep the staging directory, for debugging")
	flag.Parse()
	if *tfplugindocs == "" {
		fmt.Fprintln(os.Stderr, "docsgen: -tfplugindocs is required")
		os.Exit(2)
	}
	if err := run(context.Background(), *root, *tfplugindocs, *terraform, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "docsgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, tfplugindocs, terraform string, keep bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if tfplugindocs, err = filepath.Abs(tfplugindocs); err != nil {
		return err
	}
	if terraform, err = exec.LookPath(terraform); err != nil {
		return fmt.Errorf("terraform CLI not found (it exports the provider schema): %w", err)
	}
	tmp, err := os.MkdirTemp("", "vpdocs")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "docsgen: staging directory", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}

	// The examples are embedded in the pages, so they are formatted first,
	// as terraform fmt would ask of any configuration.
	rc := filepath.Join(tmp, "empty.tfrc")
	if err := os.WriteFile(rc, nil, 0o644); err != nil {
		return err
	}
	fmtCmd := exec.CommandContext(ctx, terraform, "fmt", "-recursive", filepath.Join(root, "examples"))
	fmtCmd.Env = cleanEnv(map[string]string{"TF_CLI_CONFIG_FILE": rc})
	if out, err := fmtCmd.CombinedOutput(); err != nil {
		return fmt.Errorf("terraform fmt examples: %w\n%s", err, out)
	}

	schema, err := exportSchema(ctx, root, terraform, tmp)
	if err != nil {
		return err
	}

	// tfplugindocs renders into <provider-dir>/docs and cleans it first;
	// a staging copy keeps it away from the real docs/ altogether.
	site := filepath.Join(tmp, "site")
	for _, dir := range []string{"examples", "templates"} {
		if err := copyTree(filepath.Join(root, dir), filepath.Join(site, dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stage %s: %w", dir, err)
		}
	}
	cmd := exec.CommandContext(ctx, tfplugindocs, "generate",
		"--provider-dir", site,
		"--provider-name", providerName,
		"--providers-schema", schema,
		"--website-temp-dir", filepath.Join(tmp, "tfplugindocs"),
	)
	cmd.Env = cleanEnv(nil)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tfplugindocs generate: %w\n%s", err, out)
	}

	docs := filepath.Join(root, "docs")
	for _, name := range managed {
		if err := os.RemoveAll(filepath.Join(docs, name)); err != nil {
			return err
		}
	}
	if err := copyTree(filepath.Join(site, "docs"), docs); err != nil {
		return fmt.Errorf("copy rendered docs: %w", err)
	}
	return nil
}

// exportSchema builds the provider and writes the output of
// `terraform providers schema -json` to a file, keyed by the provider's
// short name, which is what tfplugindocs looks up.
func exportSchema(ctx context.Context, root, terraform, tmp string) (string, error) {
	plugins := filepath.Join(tmp, "plugins")
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(plugins, "terraform-provider-"+providerName), "./provider")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build provider: %w\n%s", err, out)
	}

	// dev_overrides serves the fresh binary without init, a lock file or a
	// registry; checkpoint is off so terraform makes no network call.
	rc := filepath.Join(tmp, "terraformrc")
	cfg := fmt.Sprintf("disable_checkpoint = true\n\nprovider_installation {\n  dev_overrides {\n    %q = %q\n  }\n}\n", providerAddress, plugins)
	if err := os.WriteFile(rc, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return "", err
	}
	mainTF := fmt.Sprintf("terraform {\n  required_providers {\n    %s = {\n      source = %q\n    }\n  }\n}\n", providerName, providerAddress)
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(mainTF), 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, terraform, "providers", "schema", "-json")
	cmd.Dir = work
	cmd.Env = cleanEnv(map[string]string{
		"TF_CLI_CONFIG_FILE": rc,
		"TF_DATA_DIR":        filepath.Join(work, ".terraform"),
	})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("terraform providers schema -json: %w\n%s", err, stderr.String())
	}

	var doc struct {
		FormatVersion   string                     `json:"format_version"`
		ProviderSchemas map[string]json.RawMessage `json:"provider_schemas"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		return "", fmt.Errorf("parse provider schema: %w", err)
	}
	ps, ok := doc.ProviderSchemas[providerAddress]
	if !ok {
		return "", fmt.Errorf("terraform reported no schema for %s", providerAddress)
	}
	doc.ProviderSchemas = map[string]json.RawMessage{providerName: ps}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	path := filepath.Join(tmp, "schema.json")
	return path, os.WriteFile(path, b, 0o644)
}

// cleanEnv drops inherited TF_* variables (a developer's TF_CLI_CONFIG_FILE
// or TF_REATTACH_PROVIDERS would change the result) and adds set.
func cleanEnv(set map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TF_") || strings.HasPrefix(kv, "CHECKPOINT_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// copyTree copies the regular files under src to dst, creating directories.
func copyTree(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
