package generic_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

func TestJobActionIsACustomerActionOnlyWhileNotFinal(t *testing.T) {
	action := &generic.JobAction{URL: "https://pay.example/a", ExpiresAt: "2026-09-21T13:00:00Z"}
	for _, tt := range []struct {
		status string
		want   bool
	}{{"processing", true}, {"unknown", true}, {"succeeded", false}, {"failed", false}, {"expired", false}} {
		t.Run(tt.status, func(t *testing.T) {
			p, err := generic.Job{JobID: "j", JobStatus: tt.status, Action: action}.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			if (p.CustomerAction != nil) != tt.want {
				t.Fatalf("%+v", p.CustomerAction)
			}
			if tt.want && (p.CustomerAction.URL != action.URL || !p.CustomerAction.ExpiresAt.Equal(now.Add(time.Hour))) {
				t.Fatalf("%+v", p.CustomerAction)
			}
		})
	}
}

func TestRefundStatusTable(t *testing.T) {
	want := map[string]provider.RefundStatus{"processing": provider.RefundProcessing, "succeeded": provider.RefundSucceeded, "failed": provider.RefundFailed, "unknown": provider.RefundUnknown}
	providertest.RefundStatusTable(t, want, generic.RefundStatuses(), generic.MapRefundStatus, "paused")
}
