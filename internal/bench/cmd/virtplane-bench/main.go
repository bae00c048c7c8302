// Command virtplane-bench runs virtplane's benchmarks against the built
// binaries (bin/) on this host's libvirtd, and writes the figures into
// docs/performance.md. `make bench` runs `all` in quick mode, `make
// bench-full` in full mode; every section of the page names the command
// that reproduces it.
//
//	virtplane-bench [-mode quick|full] [flags] all|start|density|throughput|overhead|tfscale|recovery|migration|storage|backup|render [command flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

// measurement is one benchmark: its flags, and a run that fills a section.
type measurement struct {
	name  string
	id    string // orders the page
	title string
	// flags registers the command's flags with the mode's defaults and
	// returns a function rendering them back, for the reproducing
	// command line.
	flags func(fs *flag.FlagSet, full bool) func() string
	run   func(ctx context.Context, e *env, s *bench.Section) error
}

// byMode is a size's default: quick in -mode quick, full in -mode full.
func byMode[T any](full bool, quick, fullSize T) T {
	if full {
		return fullSize
	}
	return quick
}

var measurements = []*measurement{startBench, densityBench, throughputBench, overheadBench, tfscaleBench, recoveryBench, migrationBench, storageBench, backupBench}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err := run(log, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Error("virtplane-bench failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("virtplane-bench", flag.ContinueOnError)
	var o envOptions
	var results, doc string
	fs.StringVar(&o.mode, "mode", "quick", "quick (make bench) or full (make bench-full): the sizes' defaults")
	fs.StringVar(&o.binDir, "bin", "bin", "directory of the built virtplane-agent, virtplane-launcher and terraform-provider-virtplane")
	fs.StringVar(&o.guestDir, "guest", "bin/guest", "the test guest (make guest)")
	fs.StringVar(&o.workRoot, "work", "/tmp", "where the run's directory (agents' data, logs) is made; keep the path short")
	fs.StringVar(&o.uri, "libvirt-uri", launcher.DefaultLibvirtURI, "libvirt for the real guests")
	fs.BoolVar(&o.keep, "keep", false, "keep the run's directory (agent and launcher logs)")
	fs.StringVar(&results, "results", "", "JSON results file (default bin/bench/<mode>.json)")
	fs.StringVar(&doc, "doc", "docs/performance.md", "page to write the figures into; empty skips it")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: virtplane-bench [flags] all|start|density|throughput|overhead|tfscale|recovery|migration|storage|backup|render [command flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.mode != "quick" && o.mode != "full" {
		return fmt.Errorf("-mode: %q: want quick or full", o.mode)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no command")
	}
	if results == "" {
		results = filepath.Join("bin", "bench", o.mode+".json")
	}
	o.profiles = filepath.Join(filepath.Dir(results), "profiles")
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	report, err := bench.LoadReport(results, o.mode)
	if err != nil {
		return err
	}
	if cmd == "render" {
		return writeDoc(report, doc)
	}
	var todo []*measurement
	cmdFlags := map[*measurement]func() string{}
	full := o.mode == "full"
	if cmd == "all" {
		todo = measurements
		for _, m := range todo {
			cmdFlags[m] = m.flags(flag.NewFlagSet(m.name, flag.ContinueOnError), full)
		}
		if len(rest) > 0 {
			return fmt.Errorf("all takes no flags; run a single command to change its sizes")
		}
	} else {
		for _, m := range measurements {
			if m.name == cmd {
				todo = []*measurement{m}
			}
		}
		if len(todo) == 0 {
			fs.Usage()
			return fmt.Errorf("unknown command %q", cmd)
		}
		mfs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		cmdFlags[todo[0]] = todo[0].flags(mfs, full)
		if err := mfs.Parse(rest); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	e, err := newEnv(ctx, log, o)
	if err != nil {
		return err
	}
	defer e.close()
	lvVer, qemuVer, err := e.lv.Versions()
	if err != nil {
		return err
	}
	report.Machine = bench.DescribeMachine(ctx, lvVer, qemuVer, e.work)

	var failed []string
	for _, m := range todo {
		s := bench.Section{ID: m.id, Title: m.title, Started: time.Now()}
		s.Command = reproduce(o, m.name, cmdFlags[m]())
		log.Info("running", "benchmark", m.name, "command", s.Command)
		load0, others := procfs.LoadAvg1(), e.lv.RunningNotPrefixed(e.prefix)
		err := m.run(ctx, e, &s)
		s.Took = time.Since(s.Started)
		s.Note("Host load: 1-minute load average %s when the section started, %s when it ended; %d running libvirt domains of others (not this benchmark's) at the start.",
			load0, procfs.LoadAvg1(), others)
		if err != nil {
			s.Error = err.Error()
			failed = append(failed, m.name)
			log.Error("benchmark failed", "benchmark", m.name, "err", err)
		}
		// Whatever the measurement left behind goes before the next one.
		if terr := e.cleanupAll(); terr != nil {
			log.Warn("teardown", "benchmark", m.name, "err", terr)
		}
		report.Put(s)
		if err := report.Save(results); err != nil {
			return err
		}
		if err := writeDoc(report, doc); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s (the page shows why)", strings.Join(failed, ", "))
	}
	return nil
}

// reproduce is the command line that runs one measurement alone with the
// same settings.
func reproduce(o envOptions, name, flags string) string {
	parts := []string{"bin/virtplane-bench", "-mode", o.mode}
	if o.uri != launcher.DefaultLibvirtURI {
		parts = append(parts, "-libvirt-uri", o.uri)
	}
	parts = append(parts, name)
	if flags != "" {
		parts = append(parts, flags)
	}
	return strings.Join(parts, " ")
}

func writeDoc(r *bench.Report, doc string) error {
	if doc == "" {
		return nil
	}
	if err := r.WriteDoc(doc); err != nil {
		return fmt.Errorf("writing %s: %w", doc, err)
	}
	return nil
}
