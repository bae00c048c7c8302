package guestnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// nft runs the nft command (package nftables) in a network namespace.
type nft struct {
	path string
	// netns names the namespace's file (/proc/<pid>/ns/net); nil or ""
	// is the caller's own.
	netns func() (string, error)
}

// apply runs doc as one transaction (`nft -j -f -`).
func (n nft) apply(ctx context.Context, doc document) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = n.run(ctx, b, "-j", "-f", "-")
	return err
}

// listTable returns `nft -j list table inet <Table>`, or nil when there
// is no such table.
func (n nft) listTable(ctx context.Context) ([]byte, error) {
	// Listing the tables first tells "absent" from a failure without
	// reading nft's error text.
	out, err := n.run(ctx, nil, "-j", "list", "tables", family)
	if err != nil {
		return nil, err
	}
	var doc document
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("reading nft's table list: %w", err)
	}
	if !slices.ContainsFunc(doc.Nftables, func(e entry) bool { return e.Table != nil && e.Table.Name == Table }) {
		return nil, nil
	}
	return n.run(ctx, nil, "-j", "list", "table", family, Table)
}

func (n nft) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	ns := ""
	if n.netns != nil {
		var err error
		if ns, err = n.netns(); err != nil {
			return nil, err
		}
	}
	var stdout, stderr bytes.Buffer
	err := inNetNS(ns, func() error {
		cmd := exec.CommandContext(ctx, n.path, args...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	switch {
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s not found: the guest firewall needs nft (Debian package nftables): %w", n.path, err)
	case err != nil:
		return nil, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// inNetNS runs fn on an OS thread of its own that has entered the network
// namespace at path ("" runs fn here). Processes fn starts inherit the
// thread's namespace. The thread is never unlocked, so it ends with fn's
// goroutine: no other goroutine ever runs in that namespace.
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// SameNetNS reports whether the network namespace files a and b name the
// same namespace.
func SameNetNS(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("network namespace %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("network namespace %s: %w", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
