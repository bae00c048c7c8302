package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// What the wait decides and how it follows the watches is imagewait's
// (and tested there); the provider's part is that a wait that runs out of
// time is errWaitTimeout, saying what was awaited, for the diagnostic.
func TestWaitImageTimeoutSaysWhat(t *testing.T) {
	// Never dialled: the context has ended before any call.
	conn, err := grpc.NewClient("passthrough:///nowhere", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "debian.qcow2", Uid: "uid-1", ResourceVersion: 5}}
	img, _, err := waitImage(ctx, client.New(conn), start)
	if !errors.Is(err, errWaitTimeout) || !strings.HasSuffix(err.Error(), ": the nodes are not listed yet") {
		t.Fatalf("err = %v, want a timeout saying what was awaited", err)
	}
	if img != start {
		t.Errorf("returned %v, want the Image the wait started from", img)
	}
}
