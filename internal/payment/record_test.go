package payment_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestRecordCountsTransitions reads paywarden_payment_transitions_total
// (SPEC §2.1, §8): Record adds one per applied phase change, labelled with
// the provider, the phases and the source, and nothing for a decision that
// changed no phase.
func TestRecordCountsTransitions(t *testing.T) {
	pol := testPolicy()
	p := created("metrics")
	p.Namespace = "record-test" // a namespace no other test counts in
	counter := func(from, to v1alpha1.PaymentPhase, source v1alpha1.ObservationSource) float64 {
		return testutil.ToFloat64(metrics.Transitions.WithLabelValues(p.Namespace, p.Spec.ProviderRef.Name, string(from), string(to), string(source)))
	}
	rec := events.NewFakeRecorder(16)

	processing := payment.AfterQuery(p, pol, answer(provider.StatusProcessing), false, t0.Add(30e9))
	payment.Record(rec, p, processing)
	if got := counter(v1alpha1.PhasePending, v1alpha1.PhaseProcessing, v1alpha1.SourceStatusQuery); got != 1 {
		t.Fatalf("Pending -> Processing via StatusQuery counted %v times, want 1", got)
	}
	p = store(p, processing)

	// The same answer again changes no phase: nothing counted.
	again := payment.AfterQuery(p, pol, answer(provider.StatusProcessing), false, t0.Add(90e9))
	payment.Record(rec, p, again)
	if got := counter(v1alpha1.PhasePending, v1alpha1.PhaseProcessing, v1alpha1.SourceStatusQuery); got != 1 {
		t.Fatalf("a stale answer counted: %v, want 1", got)
	}
	if got := counter(v1alpha1.PhaseProcessing, v1alpha1.PhaseProcessing, v1alpha1.SourceStatusQuery); got != 0 {
		t.Fatalf("Processing -> Processing counted %v times", got)
	}
	p = store(p, again)

	// A webhook's success: one more, with its own labels; no recorder still counts.
	paid := payment.ApplyEvent(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid(), withProviderID("pay_1")), t0.Add(100e9))
	payment.Record(nil, p, paid)
	if got := counter(v1alpha1.PhaseProcessing, v1alpha1.PhaseSucceeded, v1alpha1.SourceWebhook); got != 1 {
		t.Fatalf("Processing -> Succeeded via Webhook counted %v times, want 1", got)
	}
	if got := testutil.CollectAndCount(metrics.Transitions); got < 2 {
		t.Fatalf("%d series of paywarden_payment_transitions_total, want at least the 2 counted here", got)
	}
}

// TestRecordRefundCountsTransitions reads paywarden_refund_transitions_total.
func TestRecordRefundCountsTransitions(t *testing.T) {
	r := sentRefund("metrics", 500, v1alpha1.RefundProcessing)
	r.Namespace = "record-refund-test"
	counter := func(from, to v1alpha1.RefundPhase) float64 {
		return testutil.ToFloat64(metrics.RefundTransitions.WithLabelValues(r.Namespace, string(from), string(to), string(v1alpha1.SourceWebhook)))
	}
	out := payment.ApplyRefundEvent(&r, refundObs(payment.ObservedSucceeded, "evt-refunded"), t0)
	payment.RecordRefund(events.NewFakeRecorder(16), &r, paidPayment(0), out)
	if got := counter(v1alpha1.RefundProcessing, v1alpha1.RefundSucceeded); got != 1 {
		t.Fatalf("Processing -> Succeeded counted %v times, want 1", got)
	}
	r.Status = out.Status
	payment.RecordRefund(nil, &r, nil, payment.ApplyRefundEvent(&r, refundObs(payment.ObservedSucceeded, "evt-refunded"), t0))
	if got := counter(v1alpha1.RefundProcessing, v1alpha1.RefundSucceeded); got != 1 {
		t.Fatalf("a duplicate counted: %v, want 1", got)
	}
}

// objectEvents records each Event with the kind and name of the object it
// is about.
type objectEvents struct{ got []string }

func (o *objectEvents) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...interface{}) {
	kind := "?"
	switch regarding.(type) {
	case *v1alpha1.Refund:
		kind = "Refund"
	case *v1alpha1.Payment:
		kind = "Payment"
	}
	name := regarding.(metav1.Object).GetName()
	o.got = append(o.got, fmt.Sprintf("%s/%s %s %s: %s", kind, name, eventtype, reason, fmt.Sprintf(note, args...)))
}

// TestRecordRefundTellsItsPayment: a Refund's change of phase is told on
// the Refund and, named, on its Payment with the same severity; what
// changes no phase, and anything when the Payment is not known, only on
// the Refund.
func TestRecordRefundTellsItsPayment(t *testing.T) {
	r := sentRefund("five", 500, v1alpha1.RefundProcessing)
	r.Namespace = "record-refund-events"
	p := paidPayment(0)
	moved := payment.RefundOutcome{Results: []payment.RefundResult{{Source: v1alpha1.SourceWebhook,
		Transition: &payment.Transition{From: v1alpha1.PaymentPhase(v1alpha1.RefundProcessing), To: v1alpha1.PaymentPhase(v1alpha1.RefundFailed)},
		Events:     []payment.Event{{Warning: true, Reason: "RefundFailed", Message: "declined"}}}}}
	still := payment.RefundOutcome{Results: []payment.RefundResult{{Source: v1alpha1.SourceWebhook,
		Events: []payment.Event{{Reason: "RefundStale", Message: "older news"}}}}}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.Payment
		out  payment.RefundOutcome
		want []string
	}{
		{"a change of phase", p, moved, []string{"Refund/five Warning RefundFailed: declined", "Payment/" + p.Name + " Warning RefundFailed: Refund five: declined"}},
		{"no change of phase", p, still, []string{"Refund/five Normal RefundStale: older news"}},
		{"its payment not known", nil, moved, []string{"Refund/five Warning RefundFailed: declined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &objectEvents{}
			payment.RecordRefund(rec, &r, tc.p, tc.out)
			if fmt.Sprint(rec.got) != fmt.Sprint(tc.want) {
				t.Errorf("Events\n%q\nwant\n%q", rec.got, tc.want)
			}
		})
	}
}
