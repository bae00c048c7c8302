package server

import (
	"strings"
	"testing"
	"time"
)

// Flag values that cannot work are refused naming the flag.
func TestValidateRefusesFlagsThatCannotWork(t *testing.T) {
	checkValidate(t, []validateCase{
		{"defaults", func(*Options) {}, ""},
		{"leader lease at the floor", func(o *Options) { o.LeaderLease = 5 * time.Second }, ""},
		{"leader lease too short", func(o *Options) { o.LeaderLease = 2 * time.Second }, "--leader-lease (2s) must be at least 5s"},
		{"heartbeat not shorter than the lease", func(o *Options) { o.HeartbeatInterval, o.NodeLease = time.Minute, time.Minute }, "--heartbeat-interval"},
		{"unknown role", func(o *Options) { o.Role = "both" }, "--role"},
		{"negative migration bandwidth", func(o *Options) { o.ControllerOptions.Migration.BandwidthMiBPerSecond = -1 }, "--migration-bandwidth must not be negative"},
		{"more per node than per cluster", func(o *Options) {
			o.ControllerOptions.Migration.ParallelMigrationsPerCluster, o.ControllerOptions.Migration.ParallelOutboundMigrationsPerNode = 2, 3
		}, "--migrations-per-node (3) must not exceed --migrations-per-cluster (2)"},
	})
}

// validateCase is flag values set on completed defaults, and the error
// Validate must give.
type validateCase struct {
	name string
	set  func(*Options)
	want string // "" = valid; else a part of the error
}

// checkValidate validates each case's options.
func checkValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		o := Options{}
		c.set(&o)
		o.Complete()
		err := o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
