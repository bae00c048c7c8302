package procfs

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// GuestRAM finds QEMU's guest RAM in /proc/<pid>/smaps (the end-to-end
// memory test uses it too): the anonymous mapping whose size is the
// smallest one of at least the guest's memory (QEMU maps each RAM block in
// one piece, a little larger for alignment). It returns that mapping's size
// and resident set in kB: the guest RAM actually touched, by the guest or
// by QEMU zeroing it. Guest RAM is private, so its Pss equals its Rss.
func GuestRAM(pid int, guestKiB int64) (sizeKiB, rssKiB int64, err error) {
	type mapping struct {
		anon      bool
		size, rss int64
	}
	var maps []mapping
	err = readSmaps(pid, func(header bool, fields []string) {
		if header {
			// "start-end perms offset dev inode [path]".
			maps = append(maps, mapping{anon: len(fields) < 6})
			return
		}
		if len(maps) == 0 || len(fields) < 2 {
			return
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Size:":
			maps[len(maps)-1].size = n
		case "Rss:":
			maps[len(maps)-1].rss = n
		}
	})
	if err != nil {
		return 0, 0, err
	}
	best := mapping{}
	for _, m := range maps {
		if m.anon && m.size >= guestKiB && (best.size == 0 || m.size < best.size) {
			best = m
		}
	}
	if best.size == 0 {
		return 0, 0, fmt.Errorf("no anonymous mapping of at least %d kB in QEMU pid %d", guestKiB, pid)
	}
	return best.size, best.rss, nil
}

// Mapping is the resident memory of one backing object of a process.
type Mapping struct {
	Name   string // file path, or "[anon]", "[heap]", "[stack]"...
	RssKiB int64
}

// RssByMapping groups /proc/<pid>/smaps by what backs each mapping (file
// path, or the pseudo-name, with unnamed anonymous memory as "[anon]") and
// returns the groups, largest first.
func RssByMapping(pid int) ([]Mapping, error) {
	by := map[string]int64{}
	cur := ""
	err := readSmaps(pid, func(header bool, fields []string) {
		if header {
			cur = "[anon]"
			if len(fields) >= 6 {
				cur = strings.Join(fields[5:], " ")
			}
			return
		}
		if fields[0] == "Rss:" && len(fields) >= 2 {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			by[cur] += n
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]Mapping, 0, len(by))
	for k, v := range by {
		out = append(out, Mapping{Name: k, RssKiB: v})
	}
	slices.SortFunc(out, func(a, b Mapping) int { return int(b.RssKiB - a.RssKiB) })
	return out, nil
}

// readSmaps calls line with the fields of every non-empty line of
// /proc/<pid>/smaps; header is true for the line that starts a mapping
// ("start-end perms offset dev inode [path]"), false for its "Key: value"
// lines.
func readSmaps(pid int, line func(header bool, fields []string)) error {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		line(strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"), fields)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading smaps of %d: %w", pid, err)
	}
	return nil
}
