package testguest

import "strings"

// consoleLines splits serial console output into lines. The guest's tty
// writes "\r\n", and the file may end in a partial line.
func consoleLines(console string) []string {
	return strings.Split(strings.ReplaceAll(console, "\r", ""), "\n")
}

// FindMarker returns what follows marker on the first console line that
// carries it ("hostname=x uptime=1.2" for MarkerBooted). The marker must
// be followed by a space or end the line, so MarkerPersistPrevious never
// matches PersistLinePrefix. Text before the marker on the same line (an
// interleaved kernel message) is ignored.
func FindMarker(console, marker string) (string, bool) {
	for _, line := range consoleLines(console) {
		for off := 0; ; {
			i := strings.Index(line[off:], marker)
			if i < 0 {
				break
			}
			rest := line[off+i+len(marker):]
			if rest == "" {
				return "", true
			}
			if rest[0] == ' ' {
				return strings.TrimSpace(rest), true
			}
			off += i + len(marker)
		}
	}
	return "", false
}

// CountMarker counts the console lines that carry marker, e.g. to see a
// guest that booted twice.
func CountMarker(console, marker string) int {
	n := 0
	for _, line := range consoleLines(console) {
		if _, ok := FindMarker(line, marker); ok {
			n++
		}
	}
	return n
}

// Between returns the lines between the begin and end marker lines (for
// MarkerUserdataBegin/End), joined with "\n" and ending in one when not
// empty. ok is false until both markers have been printed.
func Between(console, begin, end string) (string, bool) {
	lines := consoleLines(console)
	for i, line := range lines {
		if strings.TrimSpace(line) != begin {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == end {
				if j == i+1 {
					return "", true
				}
				return strings.Join(lines[i+1:j], "\n") + "\n", true
			}
		}
		return "", false
	}
	return "", false
}

// Fields parses the "key=value key=value" text that follows a marker.
func Fields(rest string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}
