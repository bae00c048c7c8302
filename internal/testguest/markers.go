package testguest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// consoleLines splits serial console output into its complete lines. The
// guest's tty writes "\r\n". A console read while the guest writes may end
// in a partial line: it is left out, since a marker line cut short would
// yield some of its fields or none.
func consoleLines(console string) []string {
	console = strings.ReplaceAll(console, "\r", "")
	complete := console[:strings.LastIndexByte(console, '\n')+1]
	return strings.Split(strings.TrimSuffix(complete, "\n"), "\n")
}

// FindMarker returns what follows marker on the first console line that
// carries it ("hostname=x uptime=1.2" for MarkerBooted). The marker must
// be followed by a space or end the line, so MarkerPersistPrevious never
// matches PersistLinePrefix. Text before the marker on the same line (an
// interleaved kernel message) is ignored.
func FindMarker(console, marker string) (string, bool) {
	for _, line := range consoleLines(console) {
		if rest, ok := markerIn(line, marker); ok {
			return rest, true
		}
	}
	return "", false
}

// markerIn is FindMarker for one line.
func markerIn(line, marker string) (string, bool) {
	for off := 0; ; {
		i := strings.Index(line[off:], marker)
		if i < 0 {
			return "", false
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

// EachMarker calls fn, in console order, with what follows each marker
// of the given kinds, and which marker it was: markers that share a
// prefix (MarkerPersistWrite, MarkerPersistWriteFailed) are told apart.
func EachMarker(console string, fn func(marker, rest string), markers ...string) {
	for _, line := range consoleLines(console) {
		for _, m := range markers {
			if rest, ok := markerIn(line, m); ok {
				fn(m, rest)
				break
			}
		}
	}
}

// CountMarker counts the console lines that carry marker, e.g. to see a
// guest that booted twice.
func CountMarker(console, marker string) int {
	n := 0
	for _, line := range consoleLines(console) {
		if _, ok := markerIn(line, marker); ok {
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

// ProbeResult is one MarkerNetProbe line: what the guest got fetching
// http://<Target>/.
type ProbeResult struct {
	Target string
	// Reached is true when the guest got an HTTP response; Body is then
	// its first line, Error otherwise wget's message (both reduced to
	// one word of [A-Za-z0-9._:/=-], other bytes as '_').
	Reached     bool
	Body, Error string
}

// NetProbes returns the guest's probe results by target, and whether it
// has printed MarkerNetProbeDone, after which there are no more.
func NetProbes(console string) (map[string]ProbeResult, bool) {
	out := map[string]ProbeResult{}
	for _, line := range consoleLines(console) {
		rest, ok := markerIn(line, MarkerNetProbe)
		if !ok {
			continue
		}
		f := Fields(rest)
		out[f["target"]] = ProbeResult{Target: f["target"], Reached: f["result"] == "reached", Body: f["body"], Error: f["error"]}
	}
	_, done := FindMarker(console, MarkerNetProbeDone)
	return out, done
}

// CloudInitUser is what MarkerCloudInitUser says of the user the guest
// made from its cloud-config.
type CloudInitUser struct {
	Name, Home string
	UID        int
	// Keys counts the authorized key lines written; KeySHA256 holds the
	// hex SHA-256 of each of the first 8, in order (KeySHA256 of a key).
	Keys      int
	KeySHA256 []string
}

// FindCloudInitUser parses the guest's MarkerCloudInitUser line. ok is
// false until the guest printed it; err says what is wrong with a line
// that does not parse.
func FindCloudInitUser(console string) (u CloudInitUser, ok bool, err error) {
	rest, ok := FindMarker(console, MarkerCloudInitUser)
	if !ok {
		return u, false, nil
	}
	f := Fields(rest)
	u.Name, u.Home = f["name"], f["home"]
	if u.UID, err = strconv.Atoi(f["uid"]); err != nil {
		return u, true, fmt.Errorf("%s %q: uid: %w", MarkerCloudInitUser, rest, err)
	}
	if u.Keys, err = strconv.Atoi(f["keys"]); err != nil {
		return u, true, fmt.Errorf("%s %q: keys: %w", MarkerCloudInitUser, rest, err)
	}
	if u.Name == "" {
		return u, true, fmt.Errorf("%s %q: no name", MarkerCloudInitUser, rest)
	}
	for i := 0; i < min(u.Keys, 8); i++ {
		sum, ok := f[fmt.Sprintf("key%d", i)]
		if !ok {
			return u, true, fmt.Errorf("%s %q: no key%d", MarkerCloudInitUser, rest, i)
		}
		u.KeySHA256 = append(u.KeySHA256, sum)
	}
	return u, true, nil
}

// KeySHA256 is the hex SHA-256 the guest prints for an authorized key
// line (without its line end).
func KeySHA256(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

var reTick = regexp.MustCompile(MarkerTick + ` n=([0-9]+)\r?\n`)

// Ticks are the counter values of the MarkerTick lines of console that
// are complete, in the order printed; what precedes the marker on its
// line (a line cut at the start of a read) does not matter.
func Ticks(console string) []int {
	var out []int
	for _, m := range reTick.FindAllStringSubmatch(console, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

var reDiskSize = regexp.MustCompile(MarkerDiskSize + ` dev=(/dev/[a-z0-9]+) bytes=([0-9]+)\r?\n`)

// DiskSizes are the sizes in bytes the guest reported of disk dev
// (MarkerDiskSize lines, complete ones only), in the order printed: the
// last is what it sees now.
func DiskSizes(console, dev string) []int64 {
	var out []int64
	for _, m := range reDiskSize.FindAllStringSubmatch(console, -1) {
		if m[1] != dev {
			continue
		}
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err == nil {
			out = append(out, n)
		}
	}
	return out
}

// BlockDevice is a disk the guest has (MarkerBlockAdd).
type BlockDevice struct {
	Dev, Serial string
	Bytes       int64
}

// BlockDevices are the disks the guest has, by device name, after the
// MarkerBlockAdd and MarkerBlockRemove lines of console (BlockWatch), and
// how many times each serial was added and removed (a disk plugged in,
// out and in again counts 2 and 1).
func BlockDevices(console string) (now map[string]BlockDevice, added, removed map[string]int) {
	now, added, removed = map[string]BlockDevice{}, map[string]int{}, map[string]int{}
	EachMarker(console, func(marker, rest string) {
		f := Fields(rest)
		dev := f["dev"]
		if dev == "" {
			return
		}
		switch marker {
		case MarkerBlockAdd:
			n, _ := strconv.ParseInt(f["bytes"], 10, 64)
			now[dev] = BlockDevice{Dev: dev, Serial: f["serial"], Bytes: n}
			added[f["serial"]]++
		case MarkerBlockRemove:
			if d, ok := now[dev]; ok {
				removed[d.Serial]++
				delete(now, dev)
			}
		}
	}, MarkerBlockAdd, MarkerBlockRemove)
	return now, added, removed
}

// BlockBySerial is the disk of serial among devs, if there is one.
func BlockBySerial(devs map[string]BlockDevice, serial string) (BlockDevice, bool) {
	for _, d := range devs {
		if d.Serial == serial {
			return d, true
		}
	}
	return BlockDevice{}, false
}
