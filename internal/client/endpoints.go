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
// their addresses, with read-only calls retried. Calls go round-robin
// over the servers that are connected (gRPC's round_robin policy keeps a
// connection to each, reconnecting with backoff); a read refused as
// Unavailable, by a server that went away or one whose etcd lost its
// majority, is sent again to the next (retryServiceConfig). Round-robin
// rather than sticking to one server: a server that runs but is cut off
// from the etcd majority keeps its connections, and a node agent that
// stuck to it would never renew its lease.
func resolveEndpoints(endpoint string) (target string, secure bool, opts []grpc.DialOption, err error) {
	servers, err := SplitEndpoints(endpoint)
	if err != nil {
		return "", false, nil, err
	}
	if len(servers) == 1 {
		target, secure, err = parseEndpoint(servers[0])
		return target, secure, nil, err
	}
	eps := make([]resolver.Endpoint, 0, len(servers))
	for _, p := range servers {
		t, _, _ := parseEndpoint(p) // SplitEndpoints parsed it
		hostPort := strings.TrimPrefix(t, "dns:///")
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

// SplitEndpoints splits Config.Endpoint into its servers, one entry for a
// single endpoint, and checks a list: no empty entry, each a TLS endpoint
// (a unix socket reaches one server only), none twice. Dial, the
// provider's configuration check, and what must reach every server (a
// node's console sessions streams: each server hands sessions only to the
// nodes connected to it) all split with it.
func SplitEndpoints(endpoint string) ([]string, error) {
	if !strings.Contains(endpoint, ",") {
		return []string{endpoint}, nil
	}
	parts := strings.Split(endpoint, ",")
	out := make([]string, 0, len(parts))
	seen := map[string]bool{}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("endpoint %q: entry %d of %d is empty", endpoint, i+1, len(parts))
		}
		t, sec, err := parseEndpoint(p)
		if err != nil {
			return nil, fmt.Errorf("endpoint list, entry %d of %d: %w", i+1, len(parts), err)
		}
		if !sec {
			return nil, fmt.Errorf("endpoint list, entry %d of %d (%q): a unix socket reaches one server only; list the servers' https://host:port", i+1, len(parts), p)
		}
		hostPort := strings.TrimPrefix(t, "dns:///")
		if seen[hostPort] {
			return nil, fmt.Errorf("endpoint list, entry %d of %d: %s is listed twice", i+1, len(parts), hostPort)
		}
		seen[hostPort] = true
		out = append(out, p)
	}
	return out, nil
}

// readOnlyMethods are the API methods that change nothing: a call that
// broke with its server is sent again, to the next one. Calls that write
// are not: the broken server may have applied them, and the caller, who
// knows whether a repeat is harmless, decides.
// Auth's WhoAmI and CanI and Audit's Read only read too.
var readOnlyMethods = map[string]bool{"Get": true, "List": true, "Watch": true, "WhoAmI": true, "CanI": true, "Read": true}

// retryServiceConfig is the gRPC service config of a list of servers:
// round_robin over them, and read-only calls that failed Unavailable
// retried up to four times, backing off from 100 ms to 1 s, each retry
// picked anew (so on the next server).
func retryServiceConfig() string {
	type name struct {
		Service string `json:"service"`
		Method  string `json:"method"`
	}
	var names []name
	for _, svc := range apiv1.Services() {
		ms := svc.Methods()
		for j := range ms.Len() {
			if m := ms.Get(j); readOnlyMethods[string(m.Name())] {
				names = append(names, name{Service: string(svc.FullName()), Method: string(m.Name())})
			}
		}
	}
	cfg := map[string]any{"loadBalancingConfig": []any{map[string]any{"round_robin": map[string]any{}}}, "methodConfig": []any{map[string]any{
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
