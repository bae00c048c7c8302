//go:build libvirt

package virt

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
)

var (
	loopOnce sync.Once
	loopErr  error
)

// StartEventLoop registers libvirt's default event loop and runs it on its
// own goroutine. It must run before the first connection is opened:
// libvirt only delivers events and keepalives on connections opened after
// an event implementation exists. Safe to call more than once.
func StartEventLoop(log *slog.Logger) error {
	loopOnce.Do(func() {
		if err := libvirt.EventRegisterDefaultImpl(); err != nil {
			loopErr = fmt.Errorf("register libvirt event loop: %w", err)
			return
		}
		go func() {
			for {
				if err := libvirt.EventRunDefaultImpl(); err != nil {
					log.Error("libvirt event loop iteration failed", "error", err)
					time.Sleep(time.Second)
				}
			}
		}()
	})
	return loopErr
}
