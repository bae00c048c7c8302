package command

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func TestConfigPrecedence(t *testing.T) {
	env := map[string]string{
		client.EnvEndpoint:  "env-host:7443",
		client.EnvToken:     "env-token",
		client.EnvTokenFile: "/env/token",
		client.EnvCAFile:    "/env/ca.pem",
	}
	tests := []struct {
		name          string
		env           map[string]string
		args          []string
		want          client.Config
		wantNamespace string
		wantExplicit  bool
	}{
		{
			name:          "defaults",
			want:          client.Config{Endpoint: client.DefaultEndpoint},
			wantNamespace: "default",
		},
		{
			name:          "environment",
			env:           env,
			want:          client.Config{Endpoint: "env-host:7443", Token: "env-token", TokenFile: "/env/token", CAFile: "/env/ca.pem"},
			wantNamespace: "default",
		},
		{
			name: "flags win",
			env:  env,
			args: []string{"--endpoint", "https://flag:1", "--ca-file", "/flag/ca.pem", "-n", "prod"},
			// Token from the environment still beats the env token file.
			want:          client.Config{Endpoint: "https://flag:1", Token: "env-token", TokenFile: "/env/token", CAFile: "/flag/ca.pem"},
			wantNamespace: "prod",
			wantExplicit:  true,
		},
		{
			name:          "explicit token file beats the env token",
			env:           env,
			args:          []string{"--token-file", "/flag/token"},
			want:          client.Config{Endpoint: "env-host:7443", TokenFile: "/flag/token", CAFile: "/env/ca.pem"},
			wantNamespace: "default",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, o := newRootCommand(func(k string) string { return tt.env[k] })
			cmd.SetArgs(append([]string{"version"}, tt.args...))
			cmd.SetOut(&bytes.Buffer{})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got := o.config(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config = %+v\nwant     %+v", got, tt.want)
			}
			if o.namespace != tt.wantNamespace || o.namespaceExplicit() != tt.wantExplicit {
				t.Errorf("namespace = %q (explicit %v), want %q (%v)", o.namespace, o.namespaceExplicit(), tt.wantNamespace, tt.wantExplicit)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	old := Version
	Version = "v1.2.3"
	defer func() { Version = old }()
	cmd, _ := newRootCommand(func(string) string { return "" })
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "v1.2.3\n" {
		t.Errorf("version printed %q", out.String())
	}
}

func TestStopGracePeriod(t *testing.T) {
	for _, tt := range []struct {
		grace   int64
		force   bool
		want    int64 // -1: unset
		wantErr bool
	}{
		{-1, false, -1, false},
		{0, false, 0, false},
		{10, false, 10, false},
		{-1, true, 0, false},
		{0, true, 0, false},
		{10, true, 0, true},
	} {
		got, err := stopGracePeriod(tt.grace, tt.force)
		if (err != nil) != tt.wantErr {
			t.Errorf("stopGracePeriod(%d, %v) error = %v", tt.grace, tt.force, err)
			continue
		}
		if tt.wantErr {
			continue
		}
		if (got == nil) != (tt.want == -1) || (got != nil && *got != tt.want) {
			t.Errorf("stopGracePeriod(%d, %v) = %v, want %d", tt.grace, tt.force, got, tt.want)
		}
	}
}
