package bench

import (
	"strings"
	"testing"
)

// A run of one phase (make bench BENCH_FLAGS="-only ...") reports that
// phase's figures only, not zeros for the phases it did not run; results
// that do not list their phases report every figure.
func TestWriteTableReportsThePhasesThatRan(t *testing.T) {
	retained := &Results{Phases: []string{"retained"}, Manager: Manager{Retained: 10, KiBPerRetainedPayment: 13}}
	all := &Results{}
	for _, tc := range []struct {
		name      string
		r         *Results
		want, not []string
	}{
		{"only retained", retained, []string{"manager RSS per retained object"},
			[]string{"manager RSS, 0 in flight", "open-loop p99", "bytes per Payment as stored", "API server list"}},
		{"every phase", all, []string{"manager RSS, 0 in flight", "open-loop p99", "bytes per Payment as stored", "API server list"}, nil},
	} {
		var b strings.Builder
		WriteTable(&b, tc.r, nil)
		for _, s := range tc.want {
			if !strings.Contains(b.String(), s) {
				t.Errorf("%s: no %q in\n%s", tc.name, s, b.String())
			}
		}
		for _, s := range tc.not {
			if strings.Contains(b.String(), s) {
				t.Errorf("%s: %q reported for a phase that did not run:\n%s", tc.name, s, b.String())
			}
		}
	}
}
