package launcher

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// PluginName is the single plugin a launcher serves.
const PluginName = "launcher"

// Handshake is shared by the node agent and virtplane-launcher. Bump
// ProtocolVersion on incompatible launcher.proto changes: an old launcher
// still running after an agent upgrade is then refused at reattach
// instead of misbehaving.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "VIRTPLANE_LAUNCHER_PLUGIN",
	MagicCookieValue: "4c0a2a0e-virtplane-launcher",
}

// GRPCPlugin is the go-plugin glue for the Launcher service. The launcher
// sets Impl; the node agent leaves it nil and gets a
// launcherpb.LauncherClient from Dispense.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl launcherpb.LauncherServer
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the Launcher service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("launcher plugin: no server implementation")
	}
	launcherpb.RegisterLauncherServer(s, p.Impl)
	return nil
}

// GRPCClient returns a launcherpb.LauncherClient.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return launcherpb.NewLauncherClient(c), nil
}

// PluginSet is the plugin map for both sides; srv is nil on the agent.
func PluginSet(srv launcherpb.LauncherServer) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &GRPCPlugin{Impl: srv}}
}

// ServeConfig is what virtplane-launcher passes to plugin.Serve. logger
// receives go-plugin's own messages; it should write to the launcher's log
// file, not stderr (the agent holding the pipe may be gone).
func ServeConfig(srv launcherpb.LauncherServer, logger hclog.Logger) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         PluginSet(srv),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          logger,
	}
}
