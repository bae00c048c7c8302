package provider

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// providerData is what resources and data sources get from Configure.
type providerData struct {
	// client is nil while unknown is not empty.
	client *client.Client
	// endpoint is the resolved endpoint, for messages.
	endpoint string
	// unknown lists the provider attributes that were not known yet when
	// Terraform configured the provider (they depend on other resources).
	// Nothing was dialled then; readers must wait for apply.
	unknown []string
}

// Where a setting came from.
const (
	fromDefault = "default"
	fromEnv     = "env"
	fromConfig  = "config"
)

// setting is a resolved value plus its origin, so that a diagnostic can say
// "VIRTPLANE_CA_FILE" when the provider block never mentioned ca_file.
type setting struct {
	value string
	from  string
	attr  string // provider attribute
	env   string // environment variable
}

// describe names the setting the way the user set it.
func (s setting) describe() string {
	switch s.from {
	case fromEnv:
		return fmt.Sprintf("%s (from %s)", s.attr, s.env)
	case fromDefault:
		return s.attr + " (default)"
	}
	return s.attr
}

// resolvedConfig is the provider configuration after layering config over
// environment over defaults.
type resolvedConfig struct {
	endpoint, token, tokenFile, caFile setting
	clientCert, clientKey              setting
}

func (r resolvedConfig) clientConfig() client.Config {
	return client.Config{
		Endpoint:  r.endpoint.value,
		Token:     r.token.value,
		TokenFile: r.tokenFile.value,
		CAFile:    r.caFile.value,

		ClientCertFile: r.clientCert.value,
		ClientKeyFile:  r.clientKey.value,
	}
}

// resolveConfig applies the precedence config > environment > default.
// Empty strings count as unset, so `endpoint = var.x` with an empty default
// falls through to the environment. token and token_file are one choice:
// when the provider block sets either, both environment variables are
// ignored, otherwise VIRTPLANE_TOKEN could silently override token_file.
func resolveConfig(m providerModel, getenv func(string) string) resolvedConfig {
	pick := func(v types.String, attr, env string, getenv func(string) string) setting {
		s := setting{attr: attr, env: env}
		switch {
		case v.ValueString() != "":
			s.value, s.from = v.ValueString(), fromConfig
		case getenv(env) != "":
			s.value, s.from = getenv(env), fromEnv
		}
		return s
	}
	// The credential is one choice too: a token or a client certificate
	// set in the block ignores every credential variable.
	credEnv := getenv
	if m.Token.ValueString() != "" || m.TokenFile.ValueString() != "" ||
		m.ClientCertFile.ValueString() != "" || m.ClientKeyFile.ValueString() != "" {
		credEnv = func(string) string { return "" }
	}
	r := resolvedConfig{
		endpoint:  pick(m.Endpoint, "endpoint", client.EnvEndpoint, getenv),
		token:     pick(m.Token, "token", client.EnvToken, credEnv),
		tokenFile: pick(m.TokenFile, "token_file", client.EnvTokenFile, credEnv),
		caFile:    pick(m.CAFile, "ca_file", client.EnvCAFile, getenv),

		clientCert: pick(m.ClientCertFile, "client_cert_file", client.EnvClientCert, credEnv),
		clientKey:  pick(m.ClientKeyFile, "client_key_file", client.EnvClientKey, credEnv),
	}
	if !m.Endpoints.IsNull() && !m.Endpoints.IsUnknown() {
		var list []string
		for _, e := range m.Endpoints.Elements() {
			if v, ok := e.(types.String); ok && v.ValueString() != "" {
				list = append(list, v.ValueString())
			}
		}
		if len(list) > 0 {
			// One string, as VIRTPLANE_ENDPOINT lists servers.
			r.endpoint = setting{value: strings.Join(list, ","), from: fromConfig, attr: "endpoints", env: client.EnvEndpoint}
		}
	}
	if r.endpoint.value == "" {
		r.endpoint.value, r.endpoint.from = client.DefaultEndpoint, fromDefault
	}
	return r
}

// checkEndpoint validates an endpoint, or a comma-separated list of the
// servers of one control plane, with the rules of client.Dial, plus a
// numeric port check that Dial leaves to the first connection attempt. It
// reports whether the endpoint uses TLS (anything but a unix socket).
func checkEndpoint(endpoint string) (tls bool, err error) {
	servers, err := client.SplitEndpoints(endpoint)
	if err != nil {
		return false, err
	}
	for i, p := range servers {
		if tls, err = checkOneEndpoint(p); err != nil {
			if len(servers) == 1 {
				return false, err
			}
			return false, fmt.Errorf("entry %d of %d (%q): %w", i+1, len(servers), p, err)
		}
	}
	return tls, nil
}

func checkOneEndpoint(endpoint string) (tls bool, err error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		if p := strings.TrimPrefix(endpoint, "unix://"); !filepath.IsAbs(p) {
			return false, errors.New("a unix socket path must be absolute: unix:///path/to/agent.sock")
		}
		return false, nil
	case strings.HasPrefix(endpoint, "/"):
		return false, nil
	case strings.HasPrefix(endpoint, "http://"):
		return false, errors.New("plain-text http:// is not supported because the token would travel in clear; use https://host:port, host:port or a unix socket")
	case strings.Contains(endpoint, "://") && !strings.HasPrefix(endpoint, "https://"):
		return false, errors.New("unsupported scheme; want unix:///path, host:port or https://host:port")
	}
	hostPort := strings.TrimSuffix(strings.TrimPrefix(endpoint, "https://"), "/")
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || port == "" {
		return false, errors.New("want unix:///path/to/agent.sock, host:port or https://host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return false, fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	return true, nil
}

// checkCAFile reports an unreadable CA bundle before Dial does, so the
// diagnostic can point at ca_file instead of the whole provider block.
func checkCAFile(path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read CA file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s holds no PEM certificate", path)
	}
	return nil
}

// checkClientCertificate loads the pair as client.Dial will, so that a
// missing file or a key of another certificate points at the attributes.
func checkClientCertificate(certFile, keyFile string) error {
	if certFile == "" || keyFile == "" {
		return errors.New("set both client_cert_file and client_key_file, or neither")
	}
	_, err := tls.LoadX509KeyPair(certFile, keyFile)
	return err
}

// checkTokenFile mirrors client.Dial's token file rules for the same reason.
func checkTokenFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return fmt.Errorf("%s is empty", path)
	case strings.ContainsAny(token, "\r\n"):
		return fmt.Errorf("%s holds more than one line", path)
	}
	return nil
}

// endpointValidator rejects malformed endpoints at validate time, before
// anything is dialled.
func endpointValidator() validator.String {
	return stringCheck{
		describedAs: "must be unix:///path/to/agent.sock, /path/to/agent.sock, host:port or https://host:port",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			// Empty means "use the environment or the default" (see resolveConfig).
			if s == "" {
				return
			}
			if _, err := checkEndpoint(s); err != nil {
				diags.AddAttributeError(p, "Invalid virtplane endpoint", "endpoint "+strconv.Quote(s)+": "+err.Error())
			}
		},
	}
}
