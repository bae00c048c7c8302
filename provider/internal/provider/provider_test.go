package provider

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestResolveConfigPrecedence(t *testing.T) {
	env := map[string]string{
		client.EnvEndpoint:  "env.example:7443",
		client.EnvToken:     "env-token",
		client.EnvTokenFile: "/env/token",
		client.EnvCAFile:    "/env/ca.crt",
	}
	tests := []struct {
		name string
		m    providerModel
		env  map[string]string
		want client.Config
		from map[string]string // attr -> origin
	}{
		{
			name: "default",
			m:    providerModel{},
			want: client.Config{Endpoint: client.DefaultEndpoint},
			from: map[string]string{"endpoint": fromDefault},
		},
		{
			name: "env over default",
			m:    providerModel{},
			env:  env,
			want: client.Config{Endpoint: "env.example:7443", Token: "env-token", TokenFile: "/env/token", CAFile: "/env/ca.crt"},
			from: map[string]string{"endpoint": fromEnv, "token": fromEnv, "ca_file": fromEnv},
		},
		{
			name: "config over env",
			m: providerModel{
				Endpoint: types.StringValue("cfg.example:7443"),
				Token:    types.StringValue("cfg-token"),
				CAFile:   types.StringValue("/cfg/ca.crt"),
			},
			env: env,
			// token_file from the environment must not sneak in next to
			// the configured token.
			want: client.Config{Endpoint: "cfg.example:7443", Token: "cfg-token", CAFile: "/cfg/ca.crt"},
			from: map[string]string{"endpoint": fromConfig, "token": fromConfig, "ca_file": fromConfig},
		},
		{
			name: "configured token_file shadows env token",
			m:    providerModel{TokenFile: types.StringValue("/cfg/token")},
			env:  env,
			want: client.Config{Endpoint: "env.example:7443", TokenFile: "/cfg/token", CAFile: "/env/ca.crt"},
			from: map[string]string{"token_file": fromConfig, "token": ""},
		},
		{
			// A client certificate is a credential as a token is: set in
			// the block, the token variables stay out.
			name: "configured client certificate shadows env token",
			m:    providerModel{ClientCertFile: types.StringValue("/cfg/client.crt"), ClientKeyFile: types.StringValue("/cfg/client.key")},
			env:  env,
			want: client.Config{Endpoint: "env.example:7443", CAFile: "/env/ca.crt", ClientCertFile: "/cfg/client.crt", ClientKeyFile: "/cfg/client.key"},
			from: map[string]string{"client_cert_file": fromConfig, "token": "", "token_file": ""},
		},
		{
			name: "client certificate from env",
			m:    providerModel{},
			env:  map[string]string{client.EnvClientCert: "/env/client.crt", client.EnvClientKey: "/env/client.key"},
			want: client.Config{Endpoint: client.DefaultEndpoint, ClientCertFile: "/env/client.crt", ClientKeyFile: "/env/client.key"},
			from: map[string]string{"client_cert_file": fromEnv, "client_key_file": fromEnv},
		},
		{
			name: "empty strings count as unset",
			m:    providerModel{Endpoint: types.StringValue(""), CAFile: types.StringValue("")},
			env:  map[string]string{client.EnvCAFile: "/env/ca.crt"},
			want: client.Config{Endpoint: client.DefaultEndpoint, CAFile: "/env/ca.crt"},
			from: map[string]string{"endpoint": fromDefault, "ca_file": fromEnv},
		},
		{
			name: "null config",
			m: providerModel{
				Endpoint: types.StringNull(), Token: types.StringNull(),
				TokenFile: types.StringNull(), CAFile: types.StringNull(),
			},
			env:  map[string]string{client.EnvEndpoint: "/run/x.sock"},
			want: client.Config{Endpoint: "/run/x.sock"},
			from: map[string]string{"endpoint": fromEnv},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := resolveConfig(tt.m, mapEnv(tt.env))
			if got := r.clientConfig(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
			byAttr := map[string]setting{"endpoint": r.endpoint, "token": r.token, "token_file": r.tokenFile, "ca_file": r.caFile,
				"client_cert_file": r.clientCert, "client_key_file": r.clientKey}
			for attr, want := range tt.from {
				if got := byAttr[attr].from; got != want {
					t.Errorf("%s came from %q, want %q", attr, got, want)
				}
			}
		})
	}
}

func TestSettingDescribe(t *testing.T) {
	s := setting{value: "/x", from: fromEnv, attr: "ca_file", env: client.EnvCAFile}
	if got := s.describe(); got != "ca_file (from VIRTPLANE_CA_FILE)" {
		t.Errorf("describe = %q", got)
	}
}

// checkEndpoint must never accept what client.Dial rejects, or a plan would
// pass validation and fail later with a less precise message.
func TestCheckEndpointAgreesWithDial(t *testing.T) {
	tests := []struct {
		endpoint string
		ok, tls  bool
	}{
		{"unix:///run/virtplane/agent.sock", true, false},
		{"/run/virtplane/agent.sock", true, false},
		{"unix://relative.sock", false, false},
		{"agent.example:7443", true, true},
		{"https://agent.example:7443", true, true},
		{"https://agent.example:7443/", true, true},
		{"[::1]:7443", true, true},
		{"127.0.0.1:7443", true, true},
		{"http://agent.example:7443", false, false},
		{"grpc://agent.example:7443", false, false},
		{"agent.example", false, false},
		{"agent.example:", false, false},
		{":7443", false, false},
		{"agent.example:https", false, false},
		{"agent.example:70000", false, false},
		{"", false, false},
		{"a.example:7443,https://b.example:7443, c.example:7443", true, true},
		{"a.example:7443,,b.example:7443", false, false},
		{"a.example:7443,unix:///run/virtplane/agent.sock", false, false},
		{"a.example:7443,https://a.example:7443", false, false},
		{"a.example:7443,b.example:70000", false, false},
	}
	for _, tt := range tests {
		tls, err := checkEndpoint(tt.endpoint)
		if (err == nil) != tt.ok || (err == nil && tls != tt.tls) {
			t.Errorf("checkEndpoint(%q) = tls %v, err %v; want ok %v tls %v", tt.endpoint, tls, err, tt.ok, tt.tls)
		}
		if err != nil || tt.endpoint == "" {
			continue
		}
		c, err := client.Dial(context.Background(), client.Config{Endpoint: tt.endpoint})
		if err != nil {
			t.Errorf("checkEndpoint accepts %q but client.Dial rejects it: %v", tt.endpoint, err)
			continue
		}
		_ = c.Close()
	}
}

// configure runs Configure on a config built from attrs (missing ones are
// null) with the given environment.
func configure(t *testing.T, attrs map[string]tftypes.Value, env map[string]string, deferralAllowed bool) (*providerData, diag.Diagnostics, *provider.Deferred) {
	t.Helper()
	ctx := context.Background()
	p := &virtplaneProvider{getenv: mapEnv(env)}
	var sresp provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &sresp)
	vals := map[string]tftypes.Value{}
	for _, k := range []string{"endpoint", "token", "token_file", "ca_file", "client_cert_file", "client_key_file"} {
		vals[k] = tftypes.NewValue(tftypes.String, nil)
		if v, ok := attrs[k]; ok {
			vals[k] = v
		}
	}
	vals["endpoints"] = tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil)
	if v, ok := attrs["endpoints"]; ok {
		vals["endpoints"] = v
	}
	raw := tftypes.NewValue(sresp.Schema.Type().TerraformType(ctx), vals)
	req := provider.ConfigureRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: raw}}
	req.ClientCapabilities.DeferralAllowed = deferralAllowed
	var resp provider.ConfigureResponse
	p.Configure(ctx, req, &resp)
	d, _ := resp.DataSourceData.(*providerData)
	if d != nil && d.client != nil {
		t.Cleanup(func() { _ = d.client.Close() })
	}
	if resp.ResourceData != resp.DataSourceData {
		t.Error("resources and data sources got different provider data")
	}
	return d, resp.Diagnostics, resp.Deferred
}

func str(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

var unknownStr = tftypes.NewValue(tftypes.String, tftypes.UnknownValue)

// wantAttrError checks for an error diagnostic on attr whose text contains
// every one of want.
func wantAttrError(t *testing.T, diags diag.Diagnostics, attr string, want ...string) {
	t.Helper()
	for _, d := range diags.Errors() {
		wp, ok := d.(diag.DiagnosticWithPath)
		if !ok || !wp.Path().Equal(path.Root(attr)) {
			continue
		}
		text := d.Summary() + "\n" + d.Detail()
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("diagnostic on %s lacks %q:\n%s", attr, w, text)
			}
		}
		return
	}
	t.Fatalf("no error diagnostic on %s; got %v", attr, diags)
}

func TestConfigureDefaultsToLocalSocket(t *testing.T) {
	d, diags, _ := configure(t, nil, nil, false)
	if diags.HasError() || d == nil || d.client == nil {
		t.Fatalf("configure: %v", diags)
	}
	if d.endpoint != client.DefaultEndpoint {
		t.Errorf("endpoint = %q, want %q", d.endpoint, client.DefaultEndpoint)
	}
}

func TestConfigureConfigWinsOverEnv(t *testing.T) {
	d, diags, _ := configure(t,
		map[string]tftypes.Value{"endpoint": str("unix:///cfg/agent.sock")},
		map[string]string{client.EnvEndpoint: "unix:///env/agent.sock"}, false)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if d.endpoint != "unix:///cfg/agent.sock" {
		t.Errorf("endpoint = %q", d.endpoint)
	}
}

func strList(ss ...string) tftypes.Value {
	var vs []tftypes.Value
	for _, s := range ss {
		vs = append(vs, str(s))
	}
	return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, vs)
}

// endpoints lists the servers of one control plane: the client gets them
// as one comma-separated endpoint, as VIRTPLANE_ENDPOINT lists them, and
// wins over that variable; a bad entry is named.
func TestConfigureEndpoints(t *testing.T) {
	d, diags, _ := configure(t,
		map[string]tftypes.Value{"endpoints": strList("127.0.0.1:7443", "https://127.0.0.2:7443")},
		map[string]string{client.EnvEndpoint: "unix:///env/agent.sock"}, false)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if d.endpoint != "127.0.0.1:7443,https://127.0.0.2:7443" || d.client == nil {
		t.Errorf("endpoint = %q, client %v", d.endpoint, d.client)
	}
	d, diags, _ = configure(t, nil, map[string]string{client.EnvEndpoint: "127.0.0.1:7443,127.0.0.2:7443"}, false)
	if diags.HasError() || d.endpoint != "127.0.0.1:7443,127.0.0.2:7443" {
		t.Fatalf("endpoint list from the environment: %+v, %v", d, diags)
	}
	_, diags, _ = configure(t, map[string]tftypes.Value{"endpoints": strList("127.0.0.1:7443", "unix:///run/virtplane/agent.sock")}, nil, false)
	wantAttrError(t, diags, "endpoints", "Invalid virtplane endpoint", "entry 2 of 2", "one server only")
	d, diags, _ = configure(t, map[string]tftypes.Value{"endpoints": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{str("127.0.0.1:7443"), unknownStr})}, nil, false)
	if diags.HasError() || d == nil || d.client != nil || strings.Join(d.unknown, ",") != "endpoints" {
		t.Fatalf("an unknown entry: data %+v diags %v; want no client and unknown [endpoints]", d, diags)
	}
}

func TestConfigureUnknownDefersDialing(t *testing.T) {
	attrs := map[string]tftypes.Value{"endpoint": unknownStr, "ca_file": str("/does/not/exist")}
	d, diags, deferred := configure(t, attrs, nil, false)
	if diags.HasError() {
		t.Fatalf("unknown config must not fail: %v", diags)
	}
	if deferred != nil || d == nil || d.client != nil || strings.Join(d.unknown, ",") != "endpoint" {
		t.Fatalf("got data %+v deferred %v; want no client and unknown [endpoint]", d, deferred)
	}
	// Terraform versions that support deferred actions get a deferral.
	d, diags, deferred = configure(t, attrs, nil, true)
	if diags.HasError() || d != nil || deferred == nil || deferred.Reason != provider.DeferredReasonProviderConfigUnknown {
		t.Fatalf("with deferral allowed: data %+v deferred %v diags %v", d, deferred, diags)
	}
}

func TestConfigureErrorsNameTheAttribute(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	emptyToken := filepath.Join(dir, "token")
	for _, f := range []string{notPEM, emptyToken} {
		if err := os.WriteFile(f, []byte("\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("malformed endpoint", func(t *testing.T) {
		_, diags, _ := configure(t, map[string]tftypes.Value{"endpoint": str("agent.example")}, nil, false)
		wantAttrError(t, diags, "endpoint", "Invalid virtplane endpoint", `"agent.example"`)
	})
	t.Run("malformed endpoint from env", func(t *testing.T) {
		_, diags, _ := configure(t, nil, map[string]string{client.EnvEndpoint: "http://x:1"}, false)
		wantAttrError(t, diags, "endpoint", "VIRTPLANE_ENDPOINT", "plain-text")
	})
	t.Run("missing ca_file", func(t *testing.T) {
		missing := filepath.Join(dir, "missing.crt")
		_, diags, _ := configure(t, map[string]tftypes.Value{"endpoint": str("127.0.0.1:7443"), "ca_file": str(missing)}, nil, false)
		wantAttrError(t, diags, "ca_file", "Unusable ca_file", missing, "no such file")
	})
	t.Run("ca_file without PEM from env", func(t *testing.T) {
		_, diags, _ := configure(t, map[string]tftypes.Value{"endpoint": str("127.0.0.1:7443")},
			map[string]string{client.EnvCAFile: notPEM}, false)
		wantAttrError(t, diags, "ca_file", "VIRTPLANE_CA_FILE", "no PEM certificate")
	})
	t.Run("empty token_file", func(t *testing.T) {
		_, diags, _ := configure(t, map[string]tftypes.Value{"endpoint": str("127.0.0.1:7443"), "token_file": str(emptyToken)}, nil, false)
		wantAttrError(t, diags, "token_file", "Unusable token_file", "is empty")
	})
	t.Run("missing client certificate", func(t *testing.T) {
		missing := filepath.Join(dir, "client.crt")
		_, diags, _ := configure(t, map[string]tftypes.Value{"endpoint": str("127.0.0.1:7443"),
			"client_cert_file": str(missing), "client_key_file": str(filepath.Join(dir, "client.key"))}, nil, false)
		wantAttrError(t, diags, "client_cert_file", "Unusable client certificate", missing, "no such file")
	})
	t.Run("client key without certificate from env", func(t *testing.T) {
		_, diags, _ := configure(t, map[string]tftypes.Value{"endpoint": str("127.0.0.1:7443")},
			map[string]string{client.EnvClientKey: "/env/client.key"}, false)
		wantAttrError(t, diags, "client_cert_file", "Unusable client certificate", "VIRTPLANE_CLIENT_KEY", "both")
	})
}

func TestConfigureWarnsAboutTLSSettingsOnUnixSocket(t *testing.T) {
	d, diags, _ := configure(t, map[string]tftypes.Value{"token": str("secret")},
		map[string]string{client.EnvCAFile: "/env/ca.crt"}, false)
	if diags.HasError() || d == nil || d.client == nil {
		t.Fatalf("configure: %v", diags)
	}
	if w := diags.Warnings(); len(w) != 1 || !strings.Contains(w[0].Summary(), "token is ignored") {
		t.Fatalf("want one warning about token (not about the env CA file), got %v", w)
	}
	for _, d := range diags {
		if strings.Contains(d.Detail(), "secret") || strings.Contains(d.Summary(), "secret") {
			t.Fatal("a diagnostic leaks the token")
		}
	}
}

func TestProviderSchemaDocumentsEveryAttribute(t *testing.T) {
	p := New("test")()
	var resp provider.SchemaResponse
	p.Schema(context.Background(), provider.SchemaRequest{}, &resp)
	for name, a := range resp.Schema.Attributes {
		if a.GetDescription() == "" {
			t.Errorf("provider attribute %s has no description", name)
		}
	}
	if !resp.Schema.Attributes["token"].IsSensitive() {
		t.Error("token must be sensitive")
	}
}
