package inbox

import (
	"slices"
	"testing"
)

// RecentEvents remembers the last size records added, forgetting the oldest
// first; adding one it remembers changes nothing. Remembering none (size 0,
// or no RecentEvents at all) is allowed: every delivery then asks the API
// server.
func TestRecentEventsForgetsTheOldestFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		add  []string
		seen []string // of a..f
	}{
		{"within the size all are remembered", 3, []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"one over the size: the oldest is forgotten", 3, []string{"a", "b", "c", "d"}, []string{"b", "c", "d"}},
		{"round and round: the oldest each time", 2, []string{"a", "b", "c", "d", "e"}, []string{"d", "e"}},
		{"a record added again keeps its place and evicts nothing", 2, []string{"a", "a", "b"}, []string{"a", "b"}},
		{"size 0 remembers none", 0, []string{"a", "b"}, nil},
		{"size 1 remembers the last", 1, []string{"a", "b", "c"}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecentEvents(tc.size)
			for _, k := range tc.add {
				r.Add(k)
			}
			var seen []string
			for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
				if r.Seen(k) {
					seen = append(seen, k)
				}
			}
			if !slices.Equal(seen, tc.seen) {
				t.Errorf("seen %v, want %v", seen, tc.seen)
			}
		})
	}
	t.Run("no RecentEvents remembers none", func(t *testing.T) {
		var r *RecentEvents
		r.Add("a")
		if r.Seen("a") {
			t.Error("seen")
		}
	})
}
