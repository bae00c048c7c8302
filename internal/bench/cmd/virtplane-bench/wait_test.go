package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWaitUntil(t *testing.T) {
	n := 0
	if err := waitUntil(context.Background(), time.Minute, "three checks", func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("waitUntil = %v after %d checks", err, n)
	}
	err := waitUntil(context.Background(), 50*time.Millisecond, "never", func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "timed out after 50ms waiting for never") {
		t.Fatalf("waitUntil past its timeout = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitUntil(ctx, time.Minute, "never", func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("waitUntil with an ended ctx = %v", err)
	}
}
