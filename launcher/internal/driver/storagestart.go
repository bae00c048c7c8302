package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// A domain with disks on network storage starts only when QEMU has
// opened them. librados gives up on a monitor after the client_mount_timeout
// of the disk's ceph.conf (SyncOptions: config_file), but waits for an
// OSD without end: nothing that bounds it is safe for a running guest
// (rados_osd_op_timeout fails the guest's I/O when an OSD stalls). Such a
// start leaves the domain paused in its start, and libvirt's create never
// returns (docs/notes/storage-probes.md). The launcher bounds it itself.

// startBound is how long a start may take, and what it waits for.
type startBound struct {
	limit time.Duration
	// rbd names the rbd images the domain opens ("pool/image").
	rbd []string
}

// startBoundOf reads the bound the node agent set for the domain.
func startBoundOf(opts *launcherpb.SyncOptions) startBound {
	b := startBound{limit: time.Duration(opts.GetStartTimeoutMillis()) * time.Millisecond}
	for _, d := range opts.GetDisks() {
		if r := d.GetRbd(); r != nil {
			b.rbd = append(b.rbd, r.GetPool()+"/"+r.GetImage())
		}
	}
	return b
}

// destroyWait bounds the wait for a destroyed domain's create to return:
// libvirt kills QEMU first, so it returns within seconds unless libvirt
// itself hangs.
const destroyWait = 30 * time.Second

// create starts dom within b's limit: after it, the domain is destroyed
// (its create then returns) and the error says the storage did not
// answer. A start that fails on its own says why, the rbd cause first.
func (d *Driver) create(dom Domain, paused bool, b startBound) error {
	if b.limit <= 0 {
		return startError(dom.Create(paused))
	}
	done := make(chan error, 1)
	go func() { done <- dom.Create(paused) }()
	t := d.clock.NewTimer(b.limit)
	select {
	case err := <-done:
		t.Stop()
		return startError(err)
	case <-t.C():
	}
	d.log.Warn("the domain's start did not end in time; destroying it", "limit", b.limit, "rbd", b.rbd)
	// The failing start may have removed the domain already: not found,
	// or not running, is what was wanted.
	if err := dom.Destroy(false); err != nil && !errors.Is(err, ErrNoDomain) {
		d.log.Info("destroying the domain whose start hung", "err", err)
	}
	w := d.clock.NewTimer(destroyWait)
	defer w.Stop()
	var cause error
	select {
	case cause = <-done:
	case <-w.C():
		cause = fmt.Errorf("libvirt's create had not returned %s after the destroy", destroyWait)
	}
	what := "its disks"
	if len(b.rbd) > 0 {
		what = "rbd image " + strings.Join(b.rbd, ", ")
	}
	// Not DeadlineExceeded: the node agent takes that for a launcher
	// that does not answer, and would start another one.
	return status.Errorf(codes.FailedPrecondition,
		"start domain: the storage did not answer within %s: QEMU had not opened %s, so the domain was destroyed "+
			"(are the cluster's OSDs reachable from this node, and on a host that runs them, allowed by its guest firewall?) (libvirt: %v)",
		b.limit, what, cause)
}

// startError is a failed start's error: an rbd disk that QEMU could not
// open says which and why, first; anything else is libvirt's message.
func startError(err error) error {
	if err == nil {
		return nil
	}
	if cause, ok := rbdCause(err.Error()); ok {
		return status.Error(codes.FailedPrecondition, "start domain: "+cause)
	}
	return grpcError(fmt.Errorf("start domain: %w", err))
}

// rbdCause reads QEMU's failure to open an rbd disk out of libvirt's
// message, which quotes QEMU's whole -blockdev argument before the cause:
//
//	internal error: qemu unexpectedly closed the monitor: <time>
//	qemu-system-x86_64: -blockdev {"driver":"rbd","pool":"vp","image":"x",...}: error connecting: Connection timed out
//
// It returns "rbd image vp/x: <cause> (<what it means>)".
func rbdCause(msg string) (string, bool) {
	i := strings.Index(msg, "-blockdev {")
	if i < 0 {
		return "", false
	}
	dec := json.NewDecoder(strings.NewReader(msg[i+len("-blockdev "):]))
	var arg struct {
		Driver string `json:"driver"`
		Pool   string `json:"pool"`
		Image  string `json:"image"`
	}
	if err := dec.Decode(&arg); err != nil || arg.Driver != "rbd" {
		return "", false
	}
	rest := msg[i+len("-blockdev ")+int(dec.InputOffset()):]
	cause, ok := strings.CutPrefix(rest, ": ")
	if !ok || cause == "" {
		return "", false
	}
	cause = strings.TrimSpace(cause)
	out := fmt.Sprintf("QEMU could not open rbd image %s/%s: %s", arg.Pool, arg.Image, cause)
	if hint := rbdHint(cause); hint != "" {
		out += " (" + hint + ")"
	}
	return out, true
}

// rbdHint says what a cause QEMU's rbd driver gives means, for the causes
// measured on Ceph 16 (docs/notes/storage-probes.md).
func rbdHint(cause string) string {
	switch {
	case strings.HasPrefix(cause, "error connecting: Connection timed out"):
		return "no monitor answered: are the storage class's monitors reachable from this node, " +
			"and on a host that runs them, allowed by its guest firewall?"
	case strings.HasPrefix(cause, "error connecting: Permission denied"):
		return "the monitors refused the storage class's user or key"
	case strings.HasPrefix(cause, "error opening pool") && strings.Contains(cause, "No such file or directory"):
		return "the storage class's pool does not exist"
	case strings.HasPrefix(cause, "error reading header from") && strings.Contains(cause, "No such file or directory"):
		return "the volume's image does not exist in the pool"
	case strings.HasPrefix(cause, "error reading conf file"):
		return "QEMU cannot read the storage class's ceph.conf on this node"
	}
	return ""
}
