package imagewait

import (
	"fmt"
	"strconv"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Progress renders how far a node's pull is: "40% of 1.0 GiB, 2.0
// MiB/s, 30s left, attempt 2"; "5.0 MiB" while the size is unknown;
// "connecting" before anything is known (the source has not answered).
// Each part is left out while unknown.
func Progress(e *apiv1.ImageNodeStatus) string {
	done, total := e.GetBytesDone(), e.GetBytesTotal()
	var s string
	switch {
	case total > 0:
		// A source may send more than it announced; the percentage stops
		// at 100.
		s = fmt.Sprintf("%d%% of %s", min(done, total)*100/total, Bytes(total))
	case done > 0:
		s = Bytes(done)
	default:
		s = "connecting"
	}
	if r := e.GetBytesPerSecond(); r > 0 {
		s += ", " + Bytes(r) + "/s"
	}
	if eta := e.GetEtaSeconds(); eta > 0 {
		s += ", " + (time.Duration(eta) * time.Second).String() + " left"
	}
	if a := e.GetAttempts(); a > 1 {
		s += fmt.Sprintf(", attempt %d", a)
	}
	return s
}

// Bytes renders a byte count in binary units with one decimal: "512 B",
// "1.5 KiB", "1.0 GiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	const units = "KMGTPE"
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp+1 < len(units); m /= unit {
		div *= unit
		exp++
	}
	s := strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64)
	// Just under the next unit rounds up to 1024.0 of this one: say 1.0
	// of the next instead.
	if s == "1024.0" && exp+1 < len(units) {
		s, exp = "1.0", exp+1
	}
	return s + " " + units[exp:exp+1] + "iB"
}
