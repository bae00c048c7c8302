package node

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// observation is when this controller, on its own clock, first saw a
// node's current heartbeat value. The stored timestamp itself is never
// compared with the controller's clock: it was written by whichever API
// server took the heartbeat, with that server's clock, and a wrong clock
// there must not make a live node look dead.
type observation struct {
	heartbeat *timestamppb.Timestamp // the value, only compared for change
	rv        int64                  // resource version it was read at
	at        time.Time              // controller clock
}

// observe records what node shows. A heartbeat value that differs from the
// last one counts as a beat; so does the first sight of a node, which
// makes a new leader wait a full lease before it acts (it cannot know how
// long the value was there before). Views older than one already seen
// (a lagging cache after a store read) are ignored, so they cannot reset
// the clock backwards and forwards.
func (c *Controller) observe(node *apiv1.Node, now time.Time) observation {
	name := node.GetMetadata().GetName()
	hb := node.GetStatus().GetHeartbeat()
	rv := node.GetMetadata().GetResourceVersion()
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.seen[name]
	switch {
	case !ok:
		o = observation{heartbeat: hb, rv: rv, at: now}
	case rv <= o.rv:
		// Same or older view: nothing new.
	case !proto.Equal(hb, o.heartbeat):
		o = observation{heartbeat: hb, rv: rv, at: now}
	default:
		// Another writer (this controller's NotReady, an operator's
		// cordon) changed the node, not its agent.
		o.rv = rv
	}
	c.seen[name] = o
	return o
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, name)
}
