package repo

import (
	"slices"
	"strings"
	"time"
)

// Retention is how many backups to keep: the KeepLast newest, and the
// newest of each of the KeepDaily most recent days and of the KeepWeekly
// most recent weeks that have backups (restic's and Proxmox Backup
// Server's rules). A backup kept by any rule is kept. All zero keeps
// everything: no rule is not "drop all".
type Retention struct {
	KeepLast, KeepDaily, KeepWeekly int
}

// SelectRetention splits backups into those p keeps and those it drops,
// each newest first. Days are calendar days and weeks ISO weeks (Monday
// first) in now's location; now gives only the calendar, so a backup
// dated after now (a clock ahead) counts like any other. The newest
// backup is always kept. It reads nothing and writes nothing.
func SelectRetention(backups []ManifestInfo, p Retention, now time.Time) (keep, drop []ManifestInfo) {
	sorted := slices.Clone(backups)
	slices.SortFunc(sorted, func(a, b ManifestInfo) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if p.KeepLast <= 0 && p.KeepDaily <= 0 && p.KeepWeekly <= 0 {
		return sorted, nil
	}
	loc := now.Location()
	kept := make([]bool, len(sorted))
	for i := range min(max(p.KeepLast, 1), len(sorted)) {
		kept[i] = true
	}
	bucket := func(n int, key func(time.Time) int) {
		seen := map[int]bool{}
		for i, b := range sorted {
			if len(seen) >= n {
				return
			}
			k := key(b.Created.In(loc))
			if !seen[k] {
				seen[k] = true
				kept[i] = true // the newest of its day or week
			}
		}
	}
	bucket(p.KeepDaily, func(t time.Time) int { return t.Year()*1000 + t.YearDay() })
	bucket(p.KeepWeekly, func(t time.Time) int { y, w := t.ISOWeek(); return y*100 + w })
	for i, b := range sorted {
		if kept[i] {
			keep = append(keep, b)
		} else {
			drop = append(drop, b)
		}
	}
	return keep, drop
}
