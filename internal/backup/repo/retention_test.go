package repo

import (
	"slices"
	"testing"
	"time"
)

func TestSelectRetention(t *testing.T) {
	// Backups named by when they were made (UTC): 2026-12-07 is a Monday.
	at := func(s string) ManifestInfo {
		ts, err := time.Parse("2006-01-02T15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return ManifestInfo{ID: s, Created: ts}
	}
	now := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	week := []string{
		"2026-12-07T22:00", "2026-12-07T10:00", "2026-12-07T02:00", // Monday
		"2026-12-06T22:00", "2026-12-06T10:00", // Sunday
		"2026-12-05T10:00", // Saturday
		"2026-12-03T10:00", // Thursday
		"2026-11-30T10:00", // Monday the week before
		"2026-11-29T10:00", // Sunday, two ISO weeks back
		"2026-11-20T10:00",
	}
	for _, tc := range []struct {
		name   string
		p      Retention
		backup []string
		keep   []string
	}{
		{"empty", Retention{KeepLast: 2}, nil, nil},
		{"no rule keeps all", Retention{}, week, week},
		{"keep last 2", Retention{KeepLast: 2}, week, week[:2]},
		{"keep last more than there are", Retention{KeepLast: 20}, week, week},
		{"keep daily 3: the newest of the 3 latest days with backups", Retention{KeepDaily: 3}, week,
			[]string{"2026-12-07T22:00", "2026-12-06T22:00", "2026-12-05T10:00"}},
		{"keep weekly 2: ISO weeks, Monday first", Retention{KeepWeekly: 2}, week,
			[]string{"2026-12-07T22:00", "2026-12-06T22:00"}},
		{"keep weekly 3", Retention{KeepWeekly: 3}, week,
			[]string{"2026-12-07T22:00", "2026-12-06T22:00", "2026-11-29T10:00"}},
		{"rules add up, never double count", Retention{KeepLast: 2, KeepDaily: 2, KeepWeekly: 3}, week,
			[]string{"2026-12-07T22:00", "2026-12-07T10:00", "2026-12-06T22:00", "2026-11-29T10:00"}},
		{"days skip days without backups", Retention{KeepDaily: 5}, week,
			[]string{"2026-12-07T22:00", "2026-12-06T22:00", "2026-12-05T10:00", "2026-12-03T10:00", "2026-11-30T10:00"}},
		{"keep 0 of a rule still keeps the newest", Retention{KeepDaily: 0, KeepWeekly: 0, KeepLast: 0}, week[:1], week[:1]},
		{"the newest even when only weekly", Retention{KeepWeekly: 1}, []string{"2026-12-07T02:00", "2026-12-07T22:00"},
			[]string{"2026-12-07T22:00"}},
		{"a clock ahead: a backup after now counts", Retention{KeepLast: 1}, []string{"2026-12-08T10:00", "2026-12-07T22:00"},
			[]string{"2026-12-08T10:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []ManifestInfo
			// Given in any order.
			for i := len(tc.backup) - 1; i >= 0; i-- {
				in = append(in, at(tc.backup[i]))
			}
			keep, drop := SelectRetention(in, tc.p, now)
			var got []string
			for _, b := range keep {
				got = append(got, b.ID)
			}
			if !slices.Equal(got, tc.keep) {
				t.Errorf("keep = %v, want %v", got, tc.keep)
			}
			if len(keep)+len(drop) != len(in) {
				t.Errorf("keep %d + drop %d != %d", len(keep), len(drop), len(in))
			}
			for _, d := range drop {
				if slices.Contains(got, d.ID) {
					t.Errorf("%s both kept and dropped", d.ID)
				}
			}
			if len(in) > 0 && (len(keep) == 0 || keep[0].ID != slices.MaxFunc(tc.backup, func(a, b string) int {
				return at(a).Created.Compare(at(b).Created)
			})) {
				t.Errorf("the newest is not kept: %v", got)
			}
		})
	}
}

// Days are the calendar days of now's location: two backups an hour
// apart around midnight UTC are one day in New York.
func TestSelectRetentionUsesNowsLocation(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	a := ManifestInfo{ID: "a", Created: time.Date(2026, 12, 7, 23, 30, 0, 0, time.UTC)}
	b := ManifestInfo{ID: "b", Created: time.Date(2026, 12, 8, 0, 30, 0, 0, time.UTC)}
	for loc, want := range map[*time.Location]int{time.UTC: 2, ny: 1} {
		keep, _ := SelectRetention([]ManifestInfo{a, b}, Retention{KeepDaily: 2}, time.Date(2026, 12, 9, 0, 0, 0, 0, loc))
		if len(keep) != want {
			t.Errorf("%s: kept %d, want %d", loc, len(keep), want)
		}
	}
}
