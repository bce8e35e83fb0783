package bench

import (
	"context"
	"testing"
)

// BenchmarkCreateWaitBehindScheduledQueries is `make bench`'s create-wait
// figure on its own, without a cluster (about 45 s a run):
//
//	go test ./test/bench -run '^$' -bench CreateWait -benchtime 1x
func BenchmarkCreateWaitBehindScheduledQueries(b *testing.B) {
	for i := 0; i < b.N; i++ {
		w, err := MeasureCreateWait(context.Background(), 2000, 50, 100)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(w.P50Ms, "create-p50-ms")
		b.ReportMetric(w.MaxMs, "create-max-ms")
		b.ReportMetric(w.FIFOP50Ms, "fifo-p50-ms")
		b.ReportMetric(w.FIFOMaxMs, "fifo-max-ms")
	}
}
