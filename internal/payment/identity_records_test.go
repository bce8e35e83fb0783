package payment_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The ledger's records of Payments and Refunds, and the guards of what
// adopts them (SPEC §12.1).

// TestRecordsSettleWhenTheirHistorySays: a record's settled time is the
// object's last history entry; with no history, the time it is written.
func TestRecordsSettleWhenTheirHistorySays(t *testing.T) {
	now := t0.Add(100 * time.Hour)
	p := settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0)
	if rec, ok := payment.PaymentRecord(p, now); !ok || !rec.SettledAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("payment with history: %+v, %v; want settled at its last entry", rec, ok)
	}
	p.Status.History = nil
	if rec, ok := payment.PaymentRecord(p, now); !ok || !rec.SettledAt.Equal(now) {
		t.Errorf("payment without history: %+v, %v; want settled now", rec, ok)
	}
	rf := sentRefund("refund-1", 500, v1alpha1.RefundSucceeded)
	if rec, ok := payment.RefundRecord(&rf, now); !ok || !rec.SettledAt.Equal(now) || rec.Amount != 500 || rec.ProviderID != "re_refund-1" {
		t.Errorf("refund without history: %+v, %v; want settled now, 500, re_refund-1", rec, ok)
	}
	rf.Status.History = []v1alpha1.HistoryEntry{{Time: ptrTime(t0.Add(time.Hour)).Rfc3339Copy()}}
	if rec, ok := payment.RefundRecord(&rf, now); !ok || !rec.SettledAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("refund with history: %+v, %v; want settled at its last entry", rec, ok)
	}
}

// TestARefundIsRecordedOnlyWhenSettledAndSent: a Refund is remembered once
// it is final and it either went to the provider or adopted one that did.
func TestARefundIsRecordedOnlyWhenSettledAndSent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		phase   v1alpha1.RefundPhase
		sent    bool
		adopted bool
		want    bool
	}{
		{"succeeded, sent", v1alpha1.RefundSucceeded, true, false, true},
		{"failed, sent", v1alpha1.RefundFailed, true, false, true},
		{"succeeded, adopted", v1alpha1.RefundSucceeded, false, true, true},
		{"failed without a call (refused before it)", v1alpha1.RefundFailed, false, false, false},
		{"pending, sent", v1alpha1.RefundPending, true, false, false},
		{"unknown, sent", v1alpha1.RefundUnknown, true, false, false},
	} {
		rf := sentRefund("refund-1", 500, tc.phase)
		if !tc.sent {
			rf.Status.CreateRequestedAt, rf.Status.ProviderRefundID = nil, ""
		}
		if tc.adopted {
			rf.Status.AdoptedAt = ptrTime(t0)
		}
		if _, ok := payment.RefundRecord(&rf, t0); ok != tc.want {
			t.Errorf("%s: recorded %v, want %v", tc.name, ok, tc.want)
		}
	}
}

// TestAnUnsettledRecordKeepsItsPhase: a payment let go before its final
// answer is remembered in the phase it stood in; one that had none yet, as
// Pending (it may have been created).
func TestAnUnsettledRecordKeepsItsPhase(t *testing.T) {
	p := created("order-1")
	p.Status.Phase = v1alpha1.PhaseAuthorized
	p.Status.AmountReceived = &v1alpha1.Money{Value: 700, Currency: orderCurrency}
	p.Status.AmountRefunded = &v1alpha1.Money{Value: 200, Currency: orderCurrency}
	rec := payment.UnsettledRecord(p, t0)
	if rec.Phase != string(v1alpha1.PhaseAuthorized) || rec.Amount != 700 || rec.Refunded != 200 || rec.Asked != orderValue || !rec.SettledAt.Equal(t0) {
		t.Errorf("authorized: %+v", rec)
	}
	p.Status.Phase = ""
	if rec := payment.UnsettledRecord(p, t0); rec.Phase != string(v1alpha1.PhasePending) {
		t.Errorf("no phase yet: recorded %q, want Pending", rec.Phase)
	}
}

// TestOnlyANeverSentPaymentAdopts: Adopt decides only for a Payment with
// no provider id, no create marker and no phase; any of them means it went
// (or may have gone) to the provider itself, and the ledger's records of
// its order do not apply to it.
func TestOnlyANeverSentPaymentAdopts(t *testing.T) {
	rec, ok := payment.PaymentRecord(settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0), t0)
	if !ok {
		t.Fatal("no record")
	}
	recs := []payment.LedgerRecord{rec}
	fresh := func() *v1alpha1.Payment { p := newPay("order-1"); p.UID = "new-uid"; return p }
	out, adopted := payment.Adopt(fresh(), recs, t0)
	if !adopted || out.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("a never-sent payment: adopted %v phase %s", adopted, out.Status.Phase)
	}
	for _, e := range out.Events {
		if e.Reason == "Adopted" && e.Warning {
			t.Errorf("the Adopted Event is a Warning: %+v", e)
		}
	}
	if !hasEvent(out, "Adopted") {
		t.Errorf("no Adopted Event: %+v", out.Events)
	}
	for name, set := range map[string]func(p *v1alpha1.Payment){
		"tracking a provider payment": func(p *v1alpha1.Payment) { p.Spec.ProviderPaymentID = "pay_9" },
		"with a provider id":          func(p *v1alpha1.Payment) { p.Status.ProviderPaymentID = "pay_9" },
		"with a create marker":        func(p *v1alpha1.Payment) { p.Status.CreateRequestedAt = ptrTime(t0) },
		"with a phase":                func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhasePending },
	} {
		p := fresh()
		set(p)
		if _, adopted := payment.Adopt(p, recs, t0); adopted {
			t.Errorf("%s: adopted the ledger's record", name)
		}
	}
}

// TestRestoredRefund: a Refund is a restored copy of one that was sent when
// its money-uid annotation names another object and its status says no
// call; any call in status, no annotation, or its own uid, and it is not.
func TestRestoredRefund(t *testing.T) {
	restored := func() *v1alpha1.Refund {
		r := newRefund("refund-1", 500, t0)
		r.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-of-the-first"}
		return r
	}
	if !payment.RestoredRefund(restored()) {
		t.Error("a copy whose annotation names another object is not restored")
	}
	for name, set := range map[string]func(r *v1alpha1.Refund){
		"with a create marker":        func(r *v1alpha1.Refund) { r.Status.CreateRequestedAt = ptrTime(t0) },
		"with a phase":                func(r *v1alpha1.Refund) { r.Status.Phase = v1alpha1.RefundPending },
		"with a provider refund id":   func(r *v1alpha1.Refund) { r.Status.ProviderRefundID = "re_1" },
		"without the annotation":      func(r *v1alpha1.Refund) { r.Annotations = nil },
		"whose annotation is its own": func(r *v1alpha1.Refund) { r.Annotations[v1alpha1.AnnotationMoneyUID] = string(r.UID) },
	} {
		r := restored()
		set(r)
		if payment.RestoredRefund(r) {
			t.Errorf("%s: taken for a restored copy", name)
		}
	}
}

// TestAnUnsettledRefundRecordKeepsItsPhase: a Refund let go before its
// final answer is remembered in the phase it stood in, Pending if none yet.
func TestAnUnsettledRefundRecordKeepsItsPhase(t *testing.T) {
	rf := sentRefund("refund-1", 500, v1alpha1.RefundUnknown)
	if rec := payment.UnsettledRefundRecord(&rf, t0); rec.Phase != string(v1alpha1.RefundUnknown) || rec.Amount != 500 || rec.ProviderID != "re_refund-1" {
		t.Errorf("unknown: %+v", rec)
	}
	rf.Status.Phase = ""
	if rec := payment.UnsettledRefundRecord(&rf, t0); rec.Phase != string(v1alpha1.RefundPending) {
		t.Errorf("no phase yet: recorded %q, want Pending", rec.Phase)
	}
}

// TestOnlyANeverSentRefundAdopts: a Refund with a marker, or already final,
// is not decided by the ledger's records of its name.
func TestOnlyANeverSentRefundAdopts(t *testing.T) {
	rec := payment.LedgerRecord{Kind: payment.LedgerRefund, Name: "refund-1", Phase: string(v1alpha1.RefundSucceeded), ProviderID: "re_1", Asked: 500, Amount: 500, Currency: orderCurrency}
	fresh := newRefund("refund-1", 500, t0)
	if out, ok := payment.AdoptRefund(fresh, []payment.LedgerRecord{rec}, t0); !ok || out.Status.Phase != v1alpha1.RefundSucceeded {
		t.Fatalf("a never-sent Refund: adopted %v, phase %s", ok, out.Status.Phase)
	}
	sent := fresh.DeepCopy()
	sent.Status.CreateRequestedAt = ptrTime(t0)
	final := fresh.DeepCopy()
	final.Status.Phase = v1alpha1.RefundFailed
	for name, r := range map[string]*v1alpha1.Refund{"with a marker": sent, "final": final} {
		if _, ok := payment.AdoptRefund(r, []payment.LedgerRecord{rec}, t0); ok {
			t.Errorf("%s: adopted the ledger's record", name)
		}
	}
}

// TestRestored: a Payment is a restored copy of one that was sent when its
// money-uid annotation names another object and nothing says a create, a
// phase or a provider id.
func TestRestored(t *testing.T) {
	restored := func() *v1alpha1.Payment {
		p := newPay("order-1")
		p.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-of-the-first"}
		return p
	}
	if !payment.Restored(restored()) {
		t.Error("a copy whose annotation names another object is not restored")
	}
	for name, set := range map[string]func(p *v1alpha1.Payment){
		"with a create marker":        func(p *v1alpha1.Payment) { p.Status.CreateRequestedAt = ptrTime(t0) },
		"with a phase":                func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhasePending },
		"with a provider id":          func(p *v1alpha1.Payment) { p.Status.ProviderPaymentID = "pay_1" },
		"tracking a provider payment": func(p *v1alpha1.Payment) { p.Spec.ProviderPaymentID = "pay_1" },
		"without the annotation":      func(p *v1alpha1.Payment) { p.Annotations = nil },
		"whose annotation is its own": func(p *v1alpha1.Payment) { p.Annotations[v1alpha1.AnnotationMoneyUID] = string(p.UID) },
	} {
		p := restored()
		set(p)
		if payment.Restored(p) {
			t.Errorf("%s: taken for a restored copy", name)
		}
	}
}

// TestARestoredCopysLookUpWithoutAnAnswer: the look-up of a restored copy
// that gets no answer backs off as a create does (it stands for one) and
// decides nothing; a refused configuration waits for its fix without
// counting; an answer naming no payment is no answer; the Adopted Event of
// a payment found is Normal.
func TestARestoredCopysLookUpWithoutAnAnswer(t *testing.T) {
	pol := testPolicy()
	restored := newPay("order-1")
	restored.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-of-the-first"}

	once := store(restored, payment.AfterLookup(restored, pol, fails(errNoAnswer), t0))
	twice := store(once, payment.AfterLookup(once, pol, fails(errNoAnswer), t0.Add(time.Hour)))
	q := twice.Status.Query
	if q.ConsecutiveErrors != 2 || q.NextTime == nil || !q.NextTime.Time.Equal(t0.Add(time.Hour+pol.Schedule[1])) || q.Attempts != 0 {
		t.Errorf("two look-ups without an answer: %+v; want 2 errors, the next at the create backoff's second step (%v), no attempt", q, pol.Schedule[1])
	}

	unset := pol // a policy without its own wait takes DefaultConfigRetry
	unset.ConfigRetry = 0
	cfg := store(restored, payment.AfterLookup(restored, unset, fails(errUnauthorized), t0))
	q = cfg.Status.Query
	if q.ConsecutiveErrors != 0 || q.NextTime == nil || !q.NextTime.Time.Equal(t0.Add(payment.DefaultConfigRetry)) || cfg.Status.CreateRequestedAt != nil ||
		!strings.HasPrefix(q.LastError, "provider configuration problem") {
		t.Errorf("a look-up refused for its configuration: %+v; want no error counted, the next in %v, nothing created", q, payment.DefaultConfigRetry)
	}

	empty := store(restored, payment.AfterLookup(restored, pol, payment.Call{}, t0))
	if empty.Status.AdoptedAt != nil || empty.Status.CreateRequestedAt != nil || empty.Status.Phase.IsFinal() ||
		!strings.Contains(empty.Status.Query.LastError, "without a payment id") || empty.Status.Query.ConsecutiveErrors != 1 {
		t.Errorf("an answer naming no payment: %+v; want nothing adopted or created", empty.Status)
	}

	out := payment.AfterLookup(restored, pol, answer(provider.StatusSucceeded), t0)
	if !hasEvent(out, "Adopted") {
		t.Fatalf("no Adopted Event: %+v", out.Events)
	}
	for _, e := range out.Events {
		if e.Reason == "Adopted" && e.Warning {
			t.Errorf("the Adopted Event is a Warning: %+v", e)
		}
	}
}

// TestAnOrdersMoneyRecordOutlivesALaterAttemptOfItsName: Payment order-1
// took the money and went; applied again asking another amount it was
// parked (DuplicatePayment), resolved Failed by an operator and deleted.
// The ledger keeps both records of the name (LedgerRecord.Replaces). The
// manifest reverted adopts the success, the other amount its failure, and
// another Payment of the order is parked: none is created again.
func TestAnOrdersMoneyRecordOutlivesALaterAttemptOfItsName(t *testing.T) {
	paid, ok := payment.PaymentRecord(settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0), t0)
	if !ok {
		t.Fatal("no record")
	}
	failed := paid
	failed.Phase, failed.Asked, failed.Amount, failed.ProviderID = string(v1alpha1.PhaseFailed), 2500, 0, ""
	if failed.Replaces(paid) {
		t.Fatal("the failed attempt's record takes the place of the success")
	}
	recs := []payment.LedgerRecord{paid, failed}
	again := func(name string, amount int64) *v1alpha1.Payment {
		p := newPay(name)
		p.UID, p.Spec.MerchantReference, p.Spec.Amount.Value = types.UID("again-"+name), "order-1-ref", amount
		return p
	}
	for _, tc := range []struct {
		name   string
		p      *v1alpha1.Payment
		phase  v1alpha1.PaymentPhase
		review string
	}{
		{"the manifest reverted adopts the success", again("order-1", orderValue), v1alpha1.PhaseSucceeded, ""},
		{"the other amount adopts its failure", again("order-1", 2500), v1alpha1.PhaseFailed, ""},
		{"a third amount is parked", again("order-1", 3000), v1alpha1.PhaseUnknown, v1alpha1.ReasonDuplicatePayment},
		{"another Payment of the order is parked", again("order-2", orderValue), v1alpha1.PhaseUnknown, v1alpha1.ReasonDuplicatePayment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, adopted := payment.Adopt(tc.p, recs, t0.Add(time.Hour))
			got := &v1alpha1.Payment{Status: out.Status}
			if !adopted || out.Status.Phase != tc.phase || review(got) != tc.review {
				t.Fatalf("adopted %v phase %s review %q, want %s %q", adopted, out.Status.Phase, review(got), tc.phase, tc.review)
			}
			// A parked one names the record that holds the order: the
			// success, not the later failure.
			if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionNeedsReview); tc.review != "" && (c == nil || !strings.Contains(c.Message, "settled as Succeeded (provider id pay_1")) {
				t.Errorf("review %+v, want the success named", c)
			}
		})
	}
}
