package client

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// endpointsScheme names the resolver of a client with several endpoints;
// each client registers its own through grpc.WithResolvers.
const endpointsScheme = "virtplane-endpoints"

// resolveEndpoints turns Config.Endpoint into a gRPC target, whether it
// needs TLS, and, for a list of servers, the resolver that hands gRPC
// their addresses, with read-only calls retried. gRPC's default
// pick_first policy connects to the first server that answers and, when
// that connection breaks, to the next; a read that broke with the old one
// is sent again (retryServiceConfig).
func resolveEndpoints(endpoint string) (target string, secure bool, opts []grpc.DialOption, err error) {
	if !strings.Contains(endpoint, ",") {
		target, secure, err = parseEndpoint(endpoint)
		return target, secure, nil, err
	}
	parts := strings.Split(endpoint, ",")
	var eps []resolver.Endpoint
	seen := map[string]bool{}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return "", false, nil, fmt.Errorf("endpoint %q: entry %d of %d is empty", endpoint, i+1, len(parts))
		}
		t, sec, err := parseEndpoint(p)
		if err != nil {
			return "", false, nil, fmt.Errorf("endpoint list, entry %d of %d: %w", i+1, len(parts), err)
		}
		if !sec {
			return "", false, nil, fmt.Errorf("endpoint list, entry %d of %d (%q): a unix socket reaches one server only; list the servers' https://host:port", i+1, len(parts), p)
		}
		hostPort := strings.TrimPrefix(t, "dns:///")
		if seen[hostPort] {
			return "", false, nil, fmt.Errorf("endpoint list, entry %d of %d: %s is listed twice", i+1, len(parts), hostPort)
		}
		seen[hostPort] = true
		host, _, _ := net.SplitHostPort(hostPort)
		// ServerName: each server's certificate is checked for its own
		// name, not the list's.
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: hostPort, ServerName: host}}})
	}
	r := manual.NewBuilderWithScheme(endpointsScheme)
	r.InitialState(resolver.State{Endpoints: eps})
	return endpointsScheme + ":///servers", true, []grpc.DialOption{
		grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(retryServiceConfig()),
	}, nil
}

// readOnlyMethods are the API methods that change nothing: a call that
// broke with its server is sent again, to the next one. Calls that write
// are not: the broken server may have applied them, and the caller, who
// knows whether a repeat is harmless, decides.
var readOnlyMethods = map[string]bool{"Get": true, "List": true, "Watch": true}

// retryServiceConfig is the gRPC service config that retries read-only
// calls that failed Unavailable (their server went away) up to four
// times, backing off from 100 ms to 1 s: time for pick_first to reach the
// next server.
func retryServiceConfig() string {
	type name struct {
		Service string `json:"service"`
		Method  string `json:"method"`
	}
	var names []name
	svcs := apiv1.File_internal_api_v1_service_proto.Services()
	for i := range svcs.Len() {
		svc := svcs.Get(i)
		ms := svc.Methods()
		for j := range ms.Len() {
			if m := ms.Get(j); readOnlyMethods[string(m.Name())] {
				names = append(names, name{Service: string(svc.FullName()), Method: string(m.Name())})
			}
		}
	}
	cfg := map[string]any{"methodConfig": []any{map[string]any{
		"name": names,
		"retryPolicy": map[string]any{
			"maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
			"retryableStatusCodes": []string{"UNAVAILABLE"},
		},
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // a literal of strings and numbers
	}
	return string(b)
}

// Endpoints splits Config.Endpoint into its servers: one entry for a
// single endpoint. For what must reach every server, such as a node's
// console sessions stream (each server hands sessions only to the nodes
// connected to it).
func Endpoints(endpoint string) []string {
	var out []string
	for _, p := range strings.Split(endpoint, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{endpoint}
	}
	return out
}
