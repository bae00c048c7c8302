// Package command holds the virtplane-agent commands: the server (serve)
// and a kubectl-like client for the agent's gRPC API.
package command

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// rootOptions are the persistent flags every client command shares.
type rootOptions struct {
	endpoint  string
	tokenFile string
	caFile    string
	// clientCert and clientKey: a client certificate as the credential
	// (auth cert issue), instead of a token.
	clientCert, clientKey string
	namespace             string

	flags  *pflag.FlagSet
	getenv func(string) string
}

// NewRootCommand builds the virtplane-agent command tree. Errors are
// returned, not printed; the caller prints "error: ..." and exits 1.
func NewRootCommand() *cobra.Command {
	cmd, _ := newRootCommand(os.Getenv)
	return cmd
}

// newRootCommand takes getenv, and returns the shared options, for tests.
func newRootCommand(getenv func(string) string) (*cobra.Command, *rootOptions) {
	o := &rootOptions{getenv: getenv}
	cmd := &cobra.Command{
		Use:   "virtplane-agent",
		Short: "KubeVirt's VM lifecycle without Kubernetes",
		Long: `virtplane-agent runs the virtplane server (serve) and talks to it like kubectl.

The client commands reach the agent at --endpoint: unix:///path (default
` + client.DefaultEndpoint + `, no token needed), host:port or
https://host:port (TLS; bearer token from VIRTPLANE_TOKEN or --token-file, or
a client certificate with --client-cert and --client-key). The token is the
admin token or a user's or service account's (auth token issue), whose roles
decide what it may do (docs/security.md).`,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	// Flag mistakes get a pointer to help instead of the full usage text.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		//lint:ignore ST1005 printed to the user as the last lines of the message, a sentence
		return fmt.Errorf("%w\nSee '%s --help' for usage.", err, c.CommandPath())
	})

	// The environment provides the defaults, so --help shows what will
	// actually be used; explicit flags win.
	endpoint := getenv(client.EnvEndpoint)
	if endpoint == "" {
		endpoint = client.DefaultEndpoint
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.endpoint, "endpoint", endpoint, "agent endpoint: unix:///path, host:port or https://host:port, or several servers comma-separated (env "+client.EnvEndpoint+")")
	pf.StringVar(&o.tokenFile, "token-file", getenv(client.EnvTokenFile), "file holding the bearer token for TCP endpoints (env "+client.EnvTokenFile+"; "+client.EnvToken+" holds the token itself)")
	pf.StringVar(&o.caFile, "ca-file", getenv(client.EnvCAFile), "PEM CA bundle to verify the agent; system roots when empty (env "+client.EnvCAFile+")")
	pf.StringVar(&o.clientCert, "client-cert", getenv(client.EnvClientCert), "client certificate (PEM) from `auth cert issue`, the credential instead of a token; with --client-key (env "+client.EnvClientCert+")")
	pf.StringVar(&o.clientKey, "client-key", getenv(client.EnvClientKey), "the client certificate's key (env "+client.EnvClientKey+")")
	pf.StringVarP(&o.namespace, "namespace", "n", "default", "namespace of the objects")
	o.flags = pf

	cmd.AddCommand(
		newServeCommand(),
		newGetCommand(o),
		newApplyCommand(o),
		newDeleteCommand(o),
		newScaleCommand(o),
		newStartCommand(o),
		newStopCommand(o),
		newRestartCommand(o),
		newPauseCommand(o),
		newUnpauseCommand(o),
		newMigrateCommand(o),
		newEvictCommand(o),
		newAddVolumeCommand(o),
		newRemoveVolumeCommand(o),
		newSnapshotCommand(o, clock.RealClock{}),
		newRestoreCommand(o, clock.RealClock{}),
		newBackupCommand(o, clock.RealClock{}),
		newCloneCommand(o, clock.RealClock{}),
		newExportCommand(o, clock.RealClock{}),
		newAdoptCommand(o, clock.RealClock{}),
		newConsoleCommand(o),
		newNodeCommand(o),
		newTokenCommand(o),
		newImageCommand(o),
		newStorageClassCommand(o),
		newStoreCommand(o),
		newAuthCommand(o),
		newNamespaceCommand(o),
		newAuditCommand(o, clock.RealClock{}),
		newVersionCommand(),
	)
	return cmd, o
}

// config is the connection configuration: flags, else environment, else
// defaults.
func (o *rootOptions) config() client.Config {
	cfg := client.Config{
		Endpoint:  o.endpoint,
		Token:     o.getenv(client.EnvToken),
		TokenFile: o.tokenFile,
		CAFile:    o.caFile,

		ClientCertFile: o.clientCert,
		ClientKeyFile:  o.clientKey,
	}
	// An explicit --token-file must beat a token left in the environment,
	// although the client prefers Token over TokenFile.
	if o.flags.Changed("token-file") {
		cfg.Token = ""
	}
	return cfg
}

// namespaceExplicit says whether -n was given rather than defaulted.
func (o *rootOptions) namespaceExplicit() bool {
	return o.flags.Changed("namespace")
}

func (o *rootOptions) dial(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, o.config())
}

// withClient dials the API, runs fn with it and closes it.
func (o *rootOptions) withClient(ctx context.Context, fn func(*client.Client) error) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}
