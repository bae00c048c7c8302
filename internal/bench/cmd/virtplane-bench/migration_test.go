package main

import (
	"testing"
	"time"
)

func TestOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, c := range []struct {
		name  string
		spans []span
		want  int
	}{
		{"none", nil, 0},
		{"back to back is not at once", []span{{at(0), at(2)}, {at(2), at(4)}, {at(4), at(6)}}, 1},
		{"two waves of two", []span{{at(0), at(3)}, {at(0), at(3)}, {at(3), at(6)}, {at(3), at(5)}}, 2},
		{"nested", []span{{at(0), at(10)}, {at(1), at(9)}, {at(2), at(3)}, {at(8), at(11)}}, 3},
	} {
		if got := overlap(c.spans); got != c.want {
			t.Errorf("%s: overlap = %d, want %d", c.name, got, c.want)
		}
	}
}
