package imagewait

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestProgress(t *testing.T) {
	for _, c := range []struct {
		e    *apiv1.ImageNodeStatus
		want string
	}{
		{&apiv1.ImageNodeStatus{}, "connecting"},
		{&apiv1.ImageNodeStatus{Attempts: 3}, "connecting, attempt 3"},
		{&apiv1.ImageNodeStatus{BytesDone: 5 << 20}, "5.0 MiB"},
		{&apiv1.ImageNodeStatus{BytesDone: 25, BytesTotal: 100}, "25% of 100 B"},
		{&apiv1.ImageNodeStatus{BytesTotal: 1 << 30}, "0% of 1.0 GiB"},
		{&apiv1.ImageNodeStatus{BytesDone: 410 << 20, BytesTotal: 1 << 30, BytesPerSecond: 2 << 20, EtaSeconds: 30, Attempts: 2},
			"40% of 1.0 GiB, 2.0 MiB/s, 30s left, attempt 2"},
		{&apiv1.ImageNodeStatus{BytesDone: 150 << 20, BytesTotal: 300 << 20, BytesPerSecond: 10 << 20, EtaSeconds: 15, Attempts: 1},
			"50% of 300.0 MiB, 10.0 MiB/s, 15s left"},
		{&apiv1.ImageNodeStatus{BytesDone: 512 << 20, BytesTotal: 1 << 30, EtaSeconds: 256}, "50% of 1.0 GiB, 4m16s left"},
		// More than announced: no 150%.
		{&apiv1.ImageNodeStatus{BytesDone: 150, BytesTotal: 100}, "100% of 100 B"},
	} {
		if got := Progress(c.e); got != c.want {
			t.Errorf("Progress(%v) = %q, want %q", c.e, got, c.want)
		}
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:                 "0 B",
		1023:              "1023 B",
		1024:              "1.0 KiB",
		1536:              "1.5 KiB",
		300 << 20:         "300.0 MiB",
		1<<30 - 1:         "1.0 GiB", // not 1024.0 MiB
		1<<20 - 1:         "1.0 MiB",
		5 << 40:           "5.0 TiB",
		1<<63 - 1:         "8.0 EiB",
		(1 << 30) + 1<<29: "1.5 GiB",
		-1:                "-1 B",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
