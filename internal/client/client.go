// Package client connects to a virtplane agent's gRPC API. It is shared by
// the virtplane-agent CLI, the Terraform provider and tests, so that all of
// them resolve endpoints, TLS and tokens the same way.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// DefaultEndpoint is the agent's local socket, used when no endpoint is set.
const DefaultEndpoint = "unix:///run/virtplane/agent.sock"

// Environment variables read by ConfigFromEnv.
const (
	EnvEndpoint  = "VIRTPLANE_ENDPOINT"
	EnvToken     = "VIRTPLANE_TOKEN"
	EnvTokenFile = "VIRTPLANE_TOKEN_FILE"
	EnvCAFile    = "VIRTPLANE_CA_FILE"
	// A client certificate and its key (PEM files), issued by
	// `virtplane-agent auth cert issue`: the credential instead of a token.
	EnvClientCert = "VIRTPLANE_CLIENT_CERT"
	EnvClientKey  = "VIRTPLANE_CLIENT_KEY"
)

// Config says where the agent is and how to authenticate to it.
type Config struct {
	// Endpoint is unix:///abs/path (or a bare absolute path), host:port or
	// https://host:port, or several servers of one control plane as a
	// comma-separated list of host:port or https://host:port (the client
	// spreads calls over the servers that answer and retries a refused read
	// on the next: resolveEndpoints). Empty means
	// DefaultEndpoint.
	Endpoint string
	// Token is the bearer token for TCP endpoints; it wins over TokenFile.
	Token string
	// TokenFile holds the bearer token (surrounding whitespace is trimmed).
	TokenFile string
	// CAFile is a PEM bundle to verify the agent's certificate; empty means
	// the system roots.
	CAFile string
	// ClientCertificate authenticates a node over TLS instead of a token
	// (pki.KeyPair.GetClientCertificate: a renewed certificate is used on
	// the next connection).
	ClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// ClientCertFile and ClientKeyFile are a user's or service account's
	// client certificate (signed by the agent CA) and its key, PEM: with
	// them the certificate is the credential and no token is sent, so
	// that one call never carries two identities. Both or neither.
	ClientCertFile string
	ClientKeyFile  string
	// PinnedCA ("sha256:<hex>" of a CA's public key, as
	// CreateBootstrapTokenResponse.ca_cert_hash) trusts the server when
	// the chain it presents holds a CA with that key and its certificate
	// verifies against that CA: how a joining node trusts a server it has
	// no CA file for yet (kubeadm's discovery token CA hash).
	PinnedCA string
	// ActAsNode makes calls on the unix socket as that node rather than as
	// an admin: role all's in-process node agent is held to what a node
	// may do (apiv1.NodeHeader).
	ActAsNode string
	// DialOptions are appended to the ones Dial derives (keepalive,
	// tests).
	DialOptions []grpc.DialOption
}

// ConfigFromEnv reads VIRTPLANE_ENDPOINT, VIRTPLANE_TOKEN,
// VIRTPLANE_TOKEN_FILE and VIRTPLANE_CA_FILE. Unset variables stay empty so
// callers can layer their own settings on top; Dial fills in the default
// endpoint.
func ConfigFromEnv() Config {
	return Config{
		Endpoint:  os.Getenv(EnvEndpoint),
		Token:     os.Getenv(EnvToken),
		TokenFile: os.Getenv(EnvTokenFile),
		CAFile:    os.Getenv(EnvCAFile),

		ClientCertFile: os.Getenv(EnvClientCert),
		ClientKeyFile:  os.Getenv(EnvClientKey),
	}
}

// Client bundles the service stubs of one agent connection.
type Client struct {
	VMs       apiv1.VirtualMachinesClient
	VMIs      apiv1.VirtualMachineInstancesClient
	Nodes     apiv1.NodesClient
	Consoles  apiv1.ConsolesClient
	Bootstrap apiv1.BootstrapClient
	Images    apiv1.ImagesClient
	// StorageClasses (storage_service.proto).
	StorageClasses apiv1.StorageClassesClient
	Migrations     apiv1.MigrationsClient
	// The replica kinds (replicas_service.proto).
	ReplicaSets apiv1.ReplicaSetsClient
	Pools       apiv1.PoolsClient
	// The snapshot kinds (snapshots.proto).
	Snapshots        apiv1.SnapshotsClient
	SnapshotContents apiv1.SnapshotContentsClient
	Restores         apiv1.RestoresClient
	Clones           apiv1.ClonesClient
	// Exports (exports_service.proto).
	Exports apiv1.ExportsClient
	// ImageUploads (image_uploads_service.proto).
	ImageUploads apiv1.ImageUploadsClient
	// The backup kinds (backups_service.proto).
	BackupTargets   apiv1.BackupTargetsClient
	Backups         apiv1.BackupsClient
	BackupSchedules apiv1.BackupSchedulesClient
	BackupRestores  apiv1.BackupRestoresClient
	// Adoptions (adoption_service.proto).
	Adoptions apiv1.AdoptionsClient
	// The tenancy kinds (tenancy_service.proto, docs/security.md).
	Namespaces          apiv1.NamespacesClient
	Users               apiv1.UsersClient
	ServiceAccounts     apiv1.ServiceAccountsClient
	Credentials         apiv1.CredentialsClient
	RoleBindings        apiv1.RoleBindingsClient
	ClusterRoleBindings apiv1.ClusterRoleBindingsClient
	Auth                apiv1.AuthClient
	Audit               apiv1.AuditClient
	Conn                *grpc.ClientConn
}

// Dial prepares a connection to the agent described by cfg. Like
// grpc.NewClient it does not connect yet: an unreachable agent or a
// rejected token shows up as the status of the first RPC. Configuration
// mistakes (malformed endpoint, unreadable CA or token file) fail here.
// opts are appended after the ones Dial derives, so they can override them.
func Dial(ctx context.Context, cfg Config, opts ...grpc.DialOption) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	target, secure, dialOpts, err := resolveEndpoints(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if secure {
		tlsCfg, err := tlsConfig(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		tlsCfg.GetClientCertificate = cfg.ClientCertificate
		withCert, err := clientCertificate(cfg, tlsCfg)
		if err != nil {
			return nil, err
		}
		if cfg.PinnedCA != "" {
			pinCA(tlsCfg, cfg.PinnedCA)
		}
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
		token := ""
		if !withCert {
			if token, err = loadToken(cfg); err != nil {
				return nil, err
			}
		}
		// No token is not an error: the server answers Unauthenticated,
		// which tells the user more than a local guess would.
		if token != "" {
			dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearerToken(token)))
		}
	} else {
		// The unix socket is protected by file permissions; the token is
		// not needed and is never sent over an unencrypted transport.
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if cfg.ActAsNode != "" {
			node := cfg.ActAsNode
			dialOpts = append(dialOpts,
				grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
					return invoker(metadata.AppendToOutgoingContext(ctx, apiv1.NodeHeader, node), method, req, reply, cc, o...)
				}),
				grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
					return streamer(metadata.AppendToOutgoingContext(ctx, apiv1.NodeHeader, node), desc, cc, method, o...)
				}))
		}
	}
	dialOpts = append(dialOpts, cfg.DialOptions...)
	dialOpts = append(dialOpts, opts...)

	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Endpoint, err)
	}
	return New(conn), nil
}

// New returns a client of every API service over conn, which it owns.
func New(conn *grpc.ClientConn) *Client {
	return &Client{
		VMs:              apiv1.NewVirtualMachinesClient(conn),
		VMIs:             apiv1.NewVirtualMachineInstancesClient(conn),
		Nodes:            apiv1.NewNodesClient(conn),
		Consoles:         apiv1.NewConsolesClient(conn),
		Bootstrap:        apiv1.NewBootstrapClient(conn),
		Images:           apiv1.NewImagesClient(conn),
		StorageClasses:   apiv1.NewStorageClassesClient(conn),
		Migrations:       apiv1.NewMigrationsClient(conn),
		ReplicaSets:      apiv1.NewReplicaSetsClient(conn),
		Snapshots:        apiv1.NewSnapshotsClient(conn),
		SnapshotContents: apiv1.NewSnapshotContentsClient(conn),
		Restores:         apiv1.NewRestoresClient(conn),
		Clones:           apiv1.NewClonesClient(conn),
		Exports:          apiv1.NewExportsClient(conn),
		ImageUploads:     apiv1.NewImageUploadsClient(conn),
		Pools:            apiv1.NewPoolsClient(conn),
		BackupTargets:    apiv1.NewBackupTargetsClient(conn),
		Backups:          apiv1.NewBackupsClient(conn),
		BackupSchedules:  apiv1.NewBackupSchedulesClient(conn),
		BackupRestores:   apiv1.NewBackupRestoresClient(conn),
		Adoptions:        apiv1.NewAdoptionsClient(conn),

		Namespaces:          apiv1.NewNamespacesClient(conn),
		Users:               apiv1.NewUsersClient(conn),
		ServiceAccounts:     apiv1.NewServiceAccountsClient(conn),
		Credentials:         apiv1.NewCredentialsClient(conn),
		RoleBindings:        apiv1.NewRoleBindingsClient(conn),
		ClusterRoleBindings: apiv1.NewClusterRoleBindingsClient(conn),
		Auth:                apiv1.NewAuthClient(conn),
		Audit:               apiv1.NewAuditClient(conn),
		Conn:                conn,
	}
}

// Close releases the connection.
func (c *Client) Close() error {
	if c == nil || c.Conn == nil {
		return nil
	}
	return c.Conn.Close()
}

// parseEndpoint turns an endpoint into a gRPC target and says whether it
// needs TLS.
func parseEndpoint(endpoint string) (target string, secure bool, err error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		path := strings.TrimPrefix(endpoint, "unix://")
		if !filepath.IsAbs(path) {
			return "", false, fmt.Errorf("endpoint %q: unix socket path must be absolute (unix:///path/to/socket)", endpoint)
		}
		return "unix://" + path, false, nil
	case strings.HasPrefix(endpoint, "/"):
		return "unix://" + endpoint, false, nil
	case strings.HasPrefix(endpoint, "http://"):
		return "", false, fmt.Errorf("endpoint %q: plain-text TCP is not supported (the token would travel in clear); use https://host:port or a unix socket", endpoint)
	}

	hostPort := strings.TrimSuffix(strings.TrimPrefix(endpoint, "https://"), "/")
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || port == "" {
		return "", false, fmt.Errorf("endpoint %q: want unix:///path, host:port or https://host:port", endpoint)
	}
	// Explicit dns scheme: grpc.NewClient would otherwise read "host:port"
	// as a URL with scheme "host".
	return "dns:///" + net.JoinHostPort(host, port), true, nil
}

func tlsConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil // nil RootCAs means the system roots
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificates found", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// pinCA replaces chain verification by the system or a CA file with the
// pin: Go's verification is skipped only to be done here, against the CA
// the pin names, for the server name of each connection (one client may
// reach several servers).
func pinCA(cfg *tls.Config, pin string) {
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("server sent no certificate")
		}
		for _, ca := range cs.PeerCertificates[1:] {
			if pki.PublicKeyHash(ca) != pin || !ca.IsCA {
				continue
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: cs.ServerName})
			if err != nil {
				return fmt.Errorf("server certificate does not verify against the pinned CA: %w", err)
			}
			return nil
		}
		return fmt.Errorf("the server's CA does not match the pinned %s: check --ca-cert-hash (printed by `virtplane-agent token create`)", pin)
	}
}

// clientCertificate loads ClientCertFile and ClientKeyFile into tlsCfg
// and reports whether it did. The pair is read once, at Dial: a user's
// certificate is renewed by issuing a new one, not in place as a node's.
func clientCertificate(cfg Config, tlsCfg *tls.Config) (bool, error) {
	switch {
	case cfg.ClientCertFile == "" && cfg.ClientKeyFile == "":
		return false, nil
	case cfg.ClientCertFile == "" || cfg.ClientKeyFile == "":
		return false, errors.New("client certificate: set both the certificate file and the key file, or neither")
	case cfg.ClientCertificate != nil:
		return false, errors.New("client certificate: a certificate file and a node's certificate are exclusive")
	}
	pair, err := tls.LoadX509KeyPair(cfg.ClientCertFile, cfg.ClientKeyFile)
	if err != nil {
		return false, fmt.Errorf("client certificate %s: %w", cfg.ClientCertFile, err)
	}
	tlsCfg.Certificates = []tls.Certificate{pair}
	return true, nil
}

func loadToken(cfg Config) (string, error) {
	if cfg.Token != "" {
		return strings.TrimSpace(cfg.Token), nil
	}
	if cfg.TokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", cfg.TokenFile)
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", errors.New("token file " + cfg.TokenFile + " holds more than one line")
	}
	return token, nil
}

// bearerToken sends "authorization: Bearer <token>" with every RPC.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity keeps gRPC from ever sending the token in clear.
func (bearerToken) RequireTransportSecurity() bool { return true }
