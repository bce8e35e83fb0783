package payment_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The order, not the object (SPEC §12.1): identities, the ledger's records
// and adoption, as pure rules.

func TestDefaultKeysDeriveFromTheOrderNotTheObject(t *testing.T) {
	a := newPay("order-1")
	again := newPay("order-1")
	again.UID = types.UID("a-new-uid-after-delete-and-apply")
	if a.IdempotencyKey() != again.IdempotencyKey() || a.OrderIdentity() != again.OrderIdentity() {
		t.Fatalf("the same manifest applied again has another key: %s / %s", a.IdempotencyKey(), again.IdempotencyKey())
	}
	if strings.Contains(a.IdempotencyKey(), string(a.UID)) {
		t.Errorf("key %s carries the UID", a.IdempotencyKey())
	}
	// A new attempt at the same order (a new Payment after a decline) is a new create.
	retry := newPay("order-1-retry")
	retry.Spec.MerchantReference, a.Spec.MerchantReference = "order-1", "order-1"
	if retry.IdempotencyKey() == a.IdempotencyKey() {
		t.Errorf("a new attempt at the order reuses the key %s", a.IdempotencyKey())
	}
	if retry.OrderIdentity() != a.OrderIdentity() {
		t.Errorf("two attempts at one order have two ledger identities")
	}
	// Another provider, another namespace: another order.
	other := newPay("order-1")
	other.Spec.ProviderRef.Name = "stripe"
	elsewhere := newPay("order-1")
	elsewhere.Namespace = "other-shop"
	for _, o := range []*v1alpha1.Payment{other, elsewhere} {
		if o.IdempotencyKey() == again.IdempotencyKey() || o.OrderIdentity() == again.OrderIdentity() {
			t.Errorf("%s/%s shares the identity of shop/kukopay", o.Namespace, o.Spec.ProviderRef.Name)
		}
	}
	user := newPay("order-1")
	user.Spec.IdempotencyKey = "chosen"
	if user.IdempotencyKey() != "chosen" {
		t.Errorf("spec.idempotencyKey not used: %s", user.IdempotencyKey())
	}
	if n := len(a.IdempotencyKey()); n > 64 {
		t.Errorf("key of %d characters is longer than every provider takes", n)
	}
	base := newPay("order-1")
	rf := v1alpha1.RefundIdentity(base, "r1")
	if rf == v1alpha1.RefundIdentity(base, "r2") || rf == v1alpha1.RefundIdentity(other, "r1") || rf != v1alpha1.RefundIdentity(again, "r1") {
		t.Errorf("refund identities do not follow (order, name)")
	}
}

func TestLedgerRecordRoundTrip(t *testing.T) {
	rec := payment.LedgerRecord{Kind: payment.LedgerPayment, Name: "order-1", Phase: "PartiallyRefunded", ProviderID: "pay|odd id/1",
		Asked: 1999, Amount: 1999, Refunded: 500, Currency: "USD", SettledAt: t0, RecordedAt: t0.Add(72 * time.Hour)}
	got, err := payment.DecodeRecord(rec.Encode())
	if err != nil || got != rec {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, rec)
	}
	if n := len(rec.Encode()); n > 100 {
		t.Errorf("a record takes %d bytes", n)
	}
	for _, bad := range []string{"", "v0|P|a|Succeeded|x|1|1|0|USD|0|0", "v1|P|a|Succeeded|x|1|1|0|USD|0", "v1|X|a|Succeeded|x|1|1|0|USD|0|0", "v1|P||Succeeded|x|1|1|0|USD|0|0", "v1|P|a|Succeeded|x|one|1|0|USD|0|0"} {
		if _, err := payment.DecodeRecord(bad); !errors.Is(err, payment.ErrUnreadableRecord) {
			t.Errorf("DecodeRecord(%q): %v, want ErrUnreadableRecord", bad, err)
		}
	}
}

// settled is a payment as it stands when its object is deleted.
func settled(name string, phase v1alpha1.PaymentPhase, received, refunded int64) *v1alpha1.Payment {
	p := created(name)
	p.Status.Phase = phase
	p.Status.History = append(p.Status.History, v1alpha1.HistoryEntry{Time: metav1.NewTime(t0.Add(time.Minute)), To: phase})
	if received > 0 {
		p.Status.AmountReceived = &v1alpha1.Money{Value: received, Currency: orderCurrency}
	}
	if refunded > 0 {
		p.Status.AmountRefunded = &v1alpha1.Money{Value: refunded, Currency: orderCurrency}
	}
	return p
}

func TestAdopt(t *testing.T) {
	now := t0.Add(100 * time.Hour)
	record := func(p *v1alpha1.Payment) payment.LedgerRecord {
		rec, ok := payment.PaymentRecord(p, now)
		if !ok {
			t.Fatalf("no record for settled %s", p.Name)
		}
		return rec
	}
	succeeded := record(settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0))
	refunded := record(settled("order-1", v1alpha1.PhasePartiallyRefunded, orderValue, 500))
	failedOther := record(settled("order-1-first-try", v1alpha1.PhaseFailed, 0, 0))
	canceledOther := record(settled("order-1-first-try", v1alpha1.PhaseCanceled, 0, 0))
	paidOther := record(settled("order-1-first-try", v1alpha1.PhaseSucceeded, orderValue, 0))
	// Captured in part (600 of the order's amount), then refunded in full.
	partial := record(settled("order-1", v1alpha1.PhaseSucceeded, 600, 0))
	partialRefunded := record(settled("order-1", v1alpha1.PhaseRefunded, 600, 600))
	// Settled by a success that did not say how much was paid.
	noAmount := record(settled("order-1", v1alpha1.PhaseSucceeded, 0, 0))

	for _, tt := range []struct {
		name     string
		recs     []payment.LedgerRecord
		amount   int64
		currency string
		adopted  bool
		phase    v1alpha1.PaymentPhase
		refunded int64
		received int64 // 0: the order's amount
		// noReceived: adopted without an amount received (none was recorded).
		noReceived bool
		review     string
		noOutcome  bool
	}{
		{name: "the same manifest applied again adopts Succeeded", recs: []payment.LedgerRecord{succeeded}, adopted: true, phase: v1alpha1.PhaseSucceeded},
		{name: "a refunded order comes back with its refunded total", recs: []payment.LedgerRecord{refunded}, adopted: true, phase: v1alpha1.PhasePartiallyRefunded, refunded: 500},
		{name: "a new attempt after a decline goes ahead", recs: []payment.LedgerRecord{failedOther}, noOutcome: true},
		{name: "a new attempt after a cancel goes ahead", recs: []payment.LedgerRecord{canceledOther}, noOutcome: true},
		{name: "another attempt while the order is paid is a duplicate", recs: []payment.LedgerRecord{paidOther}, phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonDuplicatePayment},
		{name: "the same name asking another amount is not adopted and not created", recs: []payment.LedgerRecord{succeeded}, amount: orderValue + 1, phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonDuplicatePayment},
		{name: "the same name asking its amount in another currency is not adopted and not created", recs: []payment.LedgerRecord{succeeded}, currency: "EUR", phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonDuplicatePayment},
		{name: "its own record wins over another attempt's", recs: []payment.LedgerRecord{paidOther, failedOther, succeeded}, adopted: true, phase: v1alpha1.PhaseSucceeded},
		{name: "a partially captured order comes back Succeeded with what it took, not an amount mismatch", recs: []payment.LedgerRecord{partial},
			adopted: true, phase: v1alpha1.PhaseSucceeded, received: 600},
		{name: "a partially captured order refunded in full comes back Refunded", recs: []payment.LedgerRecord{partialRefunded},
			adopted: true, phase: v1alpha1.PhaseRefunded, received: 600, refunded: 600},
		{name: "a success recorded without an amount comes back without one, not as 0 received", recs: []payment.LedgerRecord{noAmount},
			adopted: true, phase: v1alpha1.PhaseSucceeded, noReceived: true},
		{name: "a refund record of the same name is not a payment's", recs: []payment.LedgerRecord{{Kind: payment.LedgerRefund, Name: "order-1", Phase: "Succeeded"}}, noOutcome: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPay("order-1")
			p.UID = "new-uid"
			if tt.amount != 0 {
				p.Spec.Amount.Value = tt.amount
			}
			if tt.currency != "" {
				p.Spec.Amount.Currency = tt.currency
			}
			step := payment.Plan(p, testPolicy(), payment.Facts{Ledger: tt.recs}, now)
			if tt.noOutcome {
				if step.Outcome.Status.Phase != v1alpha1.PhasePending || step.Outcome.Status.CreateRequestedAt == nil {
					t.Fatalf("want the create marker (a new attempt), got %s %s", step.Action, step.Why)
				}
				return
			}
			if step.Action != payment.Write || step.Outcome.Status.CreateRequestedAt != nil {
				t.Fatalf("want a write and no create marker, got %s (%s)", step.Action, step.Why)
			}
			got := store(p, step.Outcome)
			if got.Status.Phase != tt.phase || review(got) != tt.review || (got.Status.AdoptedAt != nil) != tt.adopted {
				t.Fatalf("phase %s review %q adopted %v; want %s %q %v", got.Status.Phase, review(got), got.Status.AdoptedAt != nil, tt.phase, tt.review, tt.adopted)
			}
			if got.Status.Query.NextTime != nil {
				t.Errorf("an adopted or parked payment keeps a schedule")
			}
			if tt.adopted {
				received := tt.received
				if received == 0 {
					received = orderValue
				}
				switch {
				case tt.noReceived:
					if got.Status.ProviderPaymentID != "pay_1" || got.Status.AmountReceived != nil {
						t.Errorf("adopted: id %q amount received %+v, want pay_1 and none", got.Status.ProviderPaymentID, got.Status.AmountReceived)
					}
				case got.Status.ProviderPaymentID != "pay_1" || got.Status.AmountReceived == nil || got.Status.AmountReceived.Value != received:
					t.Errorf("adopted without the provider's id and amount: %+v", got.Status)
				}
				if tt.refunded > 0 && (got.Status.AmountRefunded == nil || got.Status.AmountRefunded.Value != tt.refunded) {
					t.Errorf("refunded %+v, want %d", got.Status.AmountRefunded, tt.refunded)
				}
				if h := got.Status.History; len(h) == 0 || h[0].Source != v1alpha1.SourceLedger || !strings.HasPrefix(h[0].Reason, "adopted: pay_1, not created again") {
					t.Errorf("history %+v does not say adopted", h)
				}
				if !hasEvent(step.Outcome, "Adopted") {
					t.Errorf("no Adopted Event: %+v", step.Outcome.Events)
				}
				// Adopted and settled: nothing more to do, no call.
				if s := payment.Plan(got, testPolicy(), payment.Facts{Ledger: tt.recs}, now); s.Action != payment.Nothing {
					t.Errorf("after adoption: %s (%s), want Nothing", s.Action, s.Why)
				}
			}
		})
	}
}

func hasEvent(out payment.Outcome, reason string) bool {
	for _, e := range out.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func TestNothingInFlightIsLetGo(t *testing.T) {
	p := newPay("order-1")
	if payment.MoneyMayMove(p) || payment.InFlight(p) != "" {
		t.Errorf("a payment never sent holds money: %q", payment.InFlight(p))
	}
	marked := store(p, planned(p, testPolicy(), t0).Outcome)
	if !payment.MoneyMayMove(marked) || !strings.Contains(payment.InFlight(marked), "create") {
		t.Errorf("a create marker does not hold the payment: %q", payment.InFlight(marked))
	}
	pending := created("order-1")
	if !strings.Contains(payment.InFlight(pending), "final answer") {
		t.Errorf("a pending payment at the provider: %q", payment.InFlight(pending))
	}
	if _, ok := payment.PaymentRecord(pending, t0); ok {
		t.Errorf("a pending payment has a ledger record")
	}
	done := settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0)
	if w := payment.InFlight(done); w != "" {
		t.Errorf("a settled payment waits for %q", w)
	}
	done.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, RequestedAt: metav1.NewTime(t0)}
	if w := payment.InFlight(done); !strings.Contains(w, "Cancel") {
		t.Errorf("an operation in flight is not waited for: %q", w)
	}
	unknown := created("order-1")
	unknown.Status.Phase = v1alpha1.PhaseUnknown
	if w := payment.InFlight(unknown); !strings.Contains(w, v1alpha1.AnnotationResolve) {
		t.Errorf("an Unknown payment must wait for a human: %q", w)
	}
}

// A copy restored without status but with the finalizer is looked up before
// anything is created; a new Payment is created at once (no extra call).
func TestRestoredCopyIsObservedBeforeCreate(t *testing.T) {
	pol := testPolicy()
	fresh := newPay("order-1")
	if s := planned(fresh, pol, t0); s.Action != payment.Write || s.Outcome.Status.CreateRequestedAt == nil {
		t.Fatalf("a new payment: %s (%s), want the create marker", s.Action, s.Why)
	}
	// Held in this life (the finalizer and the annotation of its own UID,
	// the marker not written yet): created, not looked up.
	held := newPay("order-1")
	held.Finalizers = []string{v1alpha1.FinalizerMoneyInFlight}
	held.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: string(held.UID)}
	if s := planned(held, pol, t0); s.Action != payment.Write || s.Outcome.Status.CreateRequestedAt == nil {
		t.Fatalf("a payment held by itself: %s (%s), want the create marker", s.Action, s.Why)
	}
	restored := held.DeepCopy()
	restored.UID = "restored-with-a-new-uid"
	s := planned(restored, pol, t0)
	if s.Action != payment.Lookup {
		t.Fatalf("a restored copy: %s (%s), want Lookup", s.Action, s.Why)
	}

	found := store(restored, payment.AfterLookup(restored, pol, answer(provider.StatusSucceeded), t0))
	if found.Status.Phase != v1alpha1.PhaseSucceeded || found.Status.ProviderPaymentID != "pay_1" || found.Status.AdoptedAt == nil ||
		found.Status.CreateRequestedAt != nil || !strings.HasPrefix(found.Status.History[0].Reason, "adopted: pay_1") {
		t.Errorf("found at the provider: %+v", found.Status)
	}

	for _, call := range []payment.Call{fails(errNotFound), fails(errUnsupported)} {
		got := store(restored, payment.AfterLookup(restored, pol, call, t0))
		if got.Status.CreateRequestedAt == nil || got.Status.AdoptedAt != nil {
			t.Fatalf("nothing found (%v): want the create marker, got %+v", call.Err, got.Status)
		}
		if s := planned(got, pol, t0); s.Action != payment.Create {
			t.Errorf("after nothing was found: %s (%s), want Create", s.Action, s.Why)
		}
	}

	// Several payments carry the reference (one per attempt at the order):
	// neither adopted nor created, for a human.
	several := &provider.Error{Provider: "p", Op: "find", Class: provider.ErrNonRetryable, Detail: "2 payments carry merchant reference order-1"}
	got := store(restored, payment.AfterLookup(restored, pol, fails(several), t0))
	if got.Status.Phase != v1alpha1.PhaseUnknown || review(got) != v1alpha1.ReasonCreateOutcomeUnknown || got.Status.CreateRequestedAt != nil || got.Status.AdoptedAt != nil {
		t.Errorf("a refused look-up: phase %s, review %q, %+v; want Unknown + CreateOutcomeUnknown, nothing created or adopted", got.Status.Phase, review(got), got.Status)
	}
	if s := planned(got, pol, t0.Add(time.Hour)); s.Action == payment.Create || s.Action == payment.Lookup {
		t.Errorf("after a refused look-up: %s (%s), want nothing sent", s.Action, s.Why)
	}

	wait := store(restored, payment.AfterLookup(restored, pol, fails(errNoAnswer), t0))
	if wait.Status.CreateRequestedAt != nil || wait.Status.Phase.IsFinal() {
		t.Fatalf("no answer must decide nothing: %+v", wait.Status)
	}
	if s := planned(wait, pol, t0); s.Action != payment.Wait {
		t.Errorf("no answer: %s, want Wait", s.Action)
	}
	if s := planned(wait, pol, t0.Add(time.Hour)); s.Action != payment.Lookup {
		t.Errorf("no answer, later: %s, want Lookup again", s.Action)
	}
}

func TestAdoptRefund(t *testing.T) {
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r1", UID: "old"},
		Spec: v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order-1"}, Amount: &v1alpha1.Amount{Value: 500, Currency: "USD"}}}
	rf.Status = v1alpha1.RefundStatus{Phase: v1alpha1.RefundSucceeded, ProviderRefundID: "re_1", Amount: &v1alpha1.Money{Value: 500, Currency: "USD"},
		CreateRequestedAt: &metav1.Time{Time: t0}, History: []v1alpha1.HistoryEntry{{Time: metav1.NewTime(t0), To: "Succeeded"}}}
	rec, ok := payment.RefundRecord(rf, t0)
	if !ok {
		t.Fatal("no record of a succeeded refund")
	}
	if w := payment.RefundInFlight(rf); w != "" {
		t.Errorf("a settled refund waits for %q", w)
	}
	again := rf.DeepCopy()
	again.UID, again.Status = "new", v1alpha1.RefundStatus{}
	step := payment.PlanRefund(again, testPolicy(), payment.RefundFacts{Payment: settled("order-1", v1alpha1.PhasePartiallyRefunded, orderValue, 500), Ledger: []payment.LedgerRecord{rec}}, t0)
	if step.Action != payment.Write || step.Outcome.Status.Phase != v1alpha1.RefundSucceeded || step.Outcome.Status.ProviderRefundID != "re_1" ||
		step.Outcome.Status.AdoptedAt == nil || step.Outcome.Status.CreateRequestedAt != nil {
		t.Fatalf("re-applied refund: %s %+v", step.Action, step.Outcome.Status)
	}
	other := again.DeepCopy()
	other.Spec.Amount.Value = 300
	if _, ok := payment.AdoptRefund(other, []payment.LedgerRecord{rec}, t0); ok {
		t.Errorf("a Refund of the same name asking 300 adopted the old one's 500")
	}
	noCurrency := rec
	noCurrency.Currency = ""
	if _, ok := payment.AdoptRefund(again, []payment.LedgerRecord{noCurrency}, t0); !ok {
		t.Errorf("a record that names no currency was not adopted: the refund would be sent again")
	}
	inFlight := rf.DeepCopy()
	inFlight.Status.Phase, inFlight.Status.ProviderRefundID = v1alpha1.RefundPending, ""
	if !strings.Contains(payment.RefundInFlight(inFlight), "refund call") {
		t.Errorf("a refund with a marker and no answer: %q", payment.RefundInFlight(inFlight))
	}
}

// A Refund name that asked several amounts over its life (a GitOps history
// changing and reverting its immutable amount replaces the object each
// time) has a record of each; a Refund applied again adopts the latest
// record asking what it asks, and only an amount no record asked is a new
// refund.
func TestARefundAdoptsTheRecordAskingWhatItAsks(t *testing.T) {
	refund := func(name string, asked int64, currency, phase, id string) payment.LedgerRecord {
		return payment.LedgerRecord{Kind: payment.LedgerRefund, Name: name, Phase: phase, ProviderID: id,
			Asked: asked, Amount: asked, Currency: currency, SettledAt: t0}
	}
	five500 := refund("five", 500, "USD", "Succeeded", "re_1")
	five300 := refund("five", 300, "USD", "Succeeded", "re_2")
	rest := refund("five", 0, "USD", "Succeeded", "re_rest")
	rest.Amount = 1199
	for _, tt := range []struct {
		name    string
		asks    *v1alpha1.Amount
		recs    []payment.LedgerRecord
		adopted string // the refund id adopted; "" when it is a new refund
	}{
		{"asking the first amount again after another adopts the first", &v1alpha1.Amount{Value: 500, Currency: "USD"}, []payment.LedgerRecord{five500, five300}, "re_1"},
		{"asking the latest amount adopts the latest", &v1alpha1.Amount{Value: 300, Currency: "USD"}, []payment.LedgerRecord{five500, five300}, "re_2"},
		{"an amount no record asked is a new refund", &v1alpha1.Amount{Value: 200, Currency: "USD"}, []payment.LedgerRecord{five500, five300}, ""},
		{"the same amount in another currency is a new refund", &v1alpha1.Amount{Value: 500, Currency: "EUR"}, []payment.LedgerRecord{five500, five300}, ""},
		{"of two records asking the same amount the latest is adopted", &v1alpha1.Amount{Value: 500, Currency: "USD"}, []payment.LedgerRecord{five500, five300, refund("five", 500, "USD", "Failed", "re_3")}, "re_3"},
		{"no amount asked adopts the record that asked none", nil, []payment.LedgerRecord{five500, rest, five300}, "re_rest"},
		{"no amount asked is not an amount a record asked", nil, []payment.LedgerRecord{five500, five300}, ""},
		{"an amount is not the none a record asked", &v1alpha1.Amount{Value: 1199, Currency: "USD"}, []payment.LedgerRecord{rest}, ""},
		{"a record of another name is another refund's", &v1alpha1.Amount{Value: 500, Currency: "USD"}, []payment.LedgerRecord{refund("six", 500, "USD", "Succeeded", "re_6")}, ""},
		{"a payment's record is no refund's", &v1alpha1.Amount{Value: 500, Currency: "USD"}, []payment.LedgerRecord{{Kind: payment.LedgerPayment, Name: "five", Phase: "Succeeded", Asked: 500, Currency: "USD"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "five", UID: "uid-3"},
				Spec: v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order-1"}, Amount: tt.asks}}
			out, ok := payment.AdoptRefund(rf, tt.recs, t0)
			if ok != (tt.adopted != "") || out.Status.ProviderRefundID != tt.adopted {
				t.Errorf("adopted %v, refund id %q; want %q", ok, out.Status.ProviderRefundID, tt.adopted)
			}
		})
	}
}

// An adopted Refund is remembered again when it goes, as an adopted Payment
// is: its record is the one it adopted, written anew (it replaces it, and the
// ledger's retention counts from the second deletion), not no record, which
// would let the first one expire a retention after the first deletion
// while the manifest is still applied. A Refund that never went out and
// adopted nothing has no record.
func TestAnAdoptedRefundIsRememberedAgain(t *testing.T) {
	later := t0.Add(40 * 24 * time.Hour)
	for _, tt := range []struct {
		name   string
		phase  v1alpha1.RefundPhase
		amount *v1alpha1.Money
	}{
		{"a succeeded refund adopted", v1alpha1.RefundSucceeded, &v1alpha1.Money{Value: 500, Currency: "USD"}},
		{"a failed refund adopted", v1alpha1.RefundFailed, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r1", UID: "old"},
				Spec: v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order-1"}, Amount: &v1alpha1.Amount{Value: 500, Currency: "USD"}},
				Status: v1alpha1.RefundStatus{Phase: tt.phase, ProviderRefundID: "re_1", Amount: tt.amount,
					CreateRequestedAt: &metav1.Time{Time: t0}, History: []v1alpha1.HistoryEntry{{Time: metav1.NewTime(t0), To: v1alpha1.PaymentPhase(tt.phase)}}}}
			rec, ok := payment.RefundRecord(first, t0)
			if !ok {
				t.Fatal("no record of a settled refund")
			}
			again := first.DeepCopy()
			again.UID, again.Status = "new", v1alpha1.RefundStatus{}
			if _, ok := payment.RefundRecord(again, later); ok {
				t.Fatal("a Refund that never went out and adopted nothing has a record")
			}
			out, ok := payment.AdoptRefund(again, []payment.LedgerRecord{rec}, later)
			if !ok {
				t.Fatal("not adopted")
			}
			again.Status = out.Status
			rec2, ok := payment.RefundRecord(again, later)
			if !ok {
				t.Fatalf("an adopted %s Refund, deleted, is not remembered again: %+v", tt.phase, again.Status)
			}
			if !rec2.Replaces(rec) || rec2.Phase != rec.Phase || rec2.ProviderID != rec.ProviderID || rec2.Amount != rec.Amount || rec2.Asked != rec.Asked {
				t.Errorf("remembered again as %+v, first as %+v", rec2, rec)
			}
		})
	}
}

// What the ledger keeps one record of: a Payment's attempt (its name; one
// that took no money never takes the place of one that did), a Refund's
// name and what it asked.
func TestLedgerRecordReplaces(t *testing.T) {
	pay := payment.LedgerRecord{Kind: payment.LedgerPayment, Name: "order-1", Phase: "Succeeded", Asked: 1999, Amount: 1999, Currency: "USD"}
	refund := payment.LedgerRecord{Kind: payment.LedgerRefund, Name: "five", Phase: "Succeeded", Asked: 500, Amount: 500, Currency: "USD"}
	with := func(r payment.LedgerRecord, f func(*payment.LedgerRecord)) payment.LedgerRecord { f(&r); return r }
	for _, tt := range []struct {
		name     string
		old, rec payment.LedgerRecord
		replaces bool
	}{
		{"a payment remembered again replaces its record", pay, with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Refunded = "PartiallyRefunded", 500 }), true},
		{"a payment's attempt is its name, whatever it asked", pay, with(pay, func(r *payment.LedgerRecord) { r.Asked = 2500 }), true},
		{"an attempt of the name that took no money is kept beside one that did", pay, with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Asked, r.Amount = "Failed", 2500, 0 }), false},
		{"nor does a cancel of the name replace it", pay, with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Amount = "Canceled", 0 }), false},
		{"an attempt that took money replaces one of the name that did not", with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Amount = "Failed", 0 }), pay, true},
		{"an attempt that took no money replaces another that took none", with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Amount = "Failed", 0 }),
			with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Amount = "Expired", 0 }), true},
		{"an attempt deleted unsettled replaces the same attempt", pay, with(pay, func(r *payment.LedgerRecord) { r.Phase = "Unknown" }), true},
		{"the same attempt remembered unsettled, settled since without the money (an operator's verdict), replaces it",
			with(pay, func(r *payment.LedgerRecord) { r.Phase = "Pending" }), with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Amount = "Failed", 0 }), true},
		{"an attempt of another amount settled without the money does not replace an unsettled one",
			with(pay, func(r *payment.LedgerRecord) { r.Phase = "Unknown" }), with(pay, func(r *payment.LedgerRecord) { r.Phase, r.Asked, r.Amount = "Failed", 2500, 0 }), false},
		{"another attempt at the order is kept beside it", pay, with(pay, func(r *payment.LedgerRecord) { r.Name = "order-1-retry" }), false},
		{"a refund remembered again replaces its record", refund, with(refund, func(r *payment.LedgerRecord) { r.ProviderID, r.Phase = "re_2", "Failed" }), true},
		{"a refund of the name asking another amount is kept beside it", refund, with(refund, func(r *payment.LedgerRecord) { r.Asked, r.Amount = 300, 300 }), false},
		{"a refund asking the same amount in another currency is kept beside it", refund, with(refund, func(r *payment.LedgerRecord) { r.Currency = "EUR" }), false},
		{"a refund asking the same amount, one record naming no currency, is the same", refund, with(refund, func(r *payment.LedgerRecord) { r.Currency = "" }), true},
		{"a refund asking no amount is the same whatever it moved", with(refund, func(r *payment.LedgerRecord) { r.Asked, r.Currency = 0, "" }),
			with(refund, func(r *payment.LedgerRecord) { r.Asked, r.Amount = 0, 1499 }), true},
		{"a refund asking no amount is not one asking an amount", refund, with(refund, func(r *payment.LedgerRecord) { r.Asked = 0 }), false},
		{"a refund of another name is kept beside it", refund, with(refund, func(r *payment.LedgerRecord) { r.Name = "six" }), false},
		{"a refund's record never replaces a payment's", pay, with(pay, func(r *payment.LedgerRecord) { r.Kind = payment.LedgerRefund }), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rec.Replaces(tt.old); got != tt.replaces {
				t.Errorf("%+v replaces %+v: %v, want %v", tt.rec, tt.old, got, tt.replaces)
			}
		})
	}
}

// Keys are stored with their markers, and a marker stored without one (by a
// paywarden that keyed calls by spec.idempotencyKey or the UID) is retried
// with that older key: an upgrade never sends a call in flight under a new
// key, which the provider could not match to the first request.
func TestKeysAreStoredWithTheirMarkersAndOldMarkersKeepTheirKeys(t *testing.T) {
	pol := testPolicy()
	p := newPay("order-1")
	marked := store(p, planned(p, pol, t0).Outcome)
	if marked.Status.IdempotencyKey != p.IdempotencyKey() || payment.CreateKey(marked) != p.IdempotencyKey() {
		t.Fatalf("the create marker stored key %q, want %q", marked.Status.IdempotencyKey, p.IdempotencyKey())
	}
	// The same marker, as an older paywarden stored it.
	old := marked.DeepCopy()
	old.Status.IdempotencyKey = ""
	if k := payment.CreateKey(old); k != string(old.UID) {
		t.Errorf("a create marked before keys were stored retries with %q, want the UID it was sent with", k)
	}
	old.Spec.IdempotencyKey = "chosen"
	if k := payment.CreateKey(old); k != "chosen" {
		t.Errorf("with spec.idempotencyKey: %q", k)
	}

	// Operations: the key stored with the marker; an older marker keeps the UID's.
	auth := created("order-1")
	auth.Status.Phase = v1alpha1.PhaseAuthorized
	auth.Spec.CaptureMethod = v1alpha1.CaptureManual
	auth.Annotations = map[string]string{v1alpha1.AnnotationCapture: "all"}
	step := planned(auth, pol, t0.Add(time.Minute))
	op := step.Outcome.Status.Operation
	if op == nil || op.IdempotencyKey != payment.CreateKey(auth)+"/capture" {
		t.Fatalf("capture marker %+v, want the key stored with it", op)
	}
	withOp := store(auth, step.Outcome)
	if k := payment.OperationKey(withOp, v1alpha1.OperationCapture); k != op.IdempotencyKey {
		t.Errorf("capture sent with %q, stored %q", k, op.IdempotencyKey)
	}
	withOp.Status.Operation.IdempotencyKey = ""
	if k := payment.OperationKey(withOp, v1alpha1.OperationCapture); k != string(withOp.UID)+"/capture" {
		t.Errorf("a capture marked before keys were stored is retried with %q", k)
	}

	// Refunds: stored with the marker; an older marker keeps the Refund's UID.
	paid := settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0)
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r1", UID: "uid-r1"},
		Spec: v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: paid.Name}, Amount: &v1alpha1.Amount{Value: 500, Currency: orderCurrency}}}
	rs := payment.PlanRefund(rf, pol, payment.RefundFacts{Payment: paid}, t0)
	if rs.Outcome.Status.CreateRequestedAt == nil || rs.Outcome.Status.IdempotencyKey != payment.RefundKey(paid, rf) {
		t.Fatalf("refund marker %+v, want the key stored with it", rs.Outcome.Status)
	}
	rf.Status = rs.Outcome.Status
	if k := payment.RefundCallKey(paid, rf); k != rf.Status.IdempotencyKey {
		t.Errorf("refund sent with %q, stored %q", k, rf.Status.IdempotencyKey)
	}
	rf.Status.IdempotencyKey = ""
	if k := payment.RefundCallKey(paid, rf); k != "uid-r1" {
		t.Errorf("a refund marked before keys were stored is retried with %q, want its UID", k)
	}
	withKey := rf.DeepCopy()
	withKey.Spec.IdempotencyKey = "merchant-key-1"
	if k := payment.RefundCallKey(paid, withKey); k != "merchant-key-1" {
		t.Errorf("a refund with spec.idempotencyKey marked before keys were stored is retried with %q, want its spec's", k)
	}
	// Not marked yet: the key its marker will store; without its payment,
	// its UID.
	unmarked := rf.DeepCopy()
	unmarked.Status = v1alpha1.RefundStatus{}
	if k := payment.RefundCallKey(paid, unmarked); k != payment.RefundKey(paid, unmarked) || k == "uid-r1" {
		t.Errorf("an unmarked refund's key %q, want %q", k, payment.RefundKey(paid, unmarked))
	}
	if k := payment.RefundCallKey(nil, unmarked); k != "uid-r1" {
		t.Errorf("an unmarked refund without its payment: key %q, want its UID", k)
	}
}

// A deleted Payment whose create may still charge keeps its merchant
// reference and key: a second attempt at the order waits (DuplicatePayment)
// instead of being created beside it. Let go (no finalizer), it frees them.
func TestADeletedPaymentInFlightKeepsItsOrder(t *testing.T) {
	first := created("order-1")
	first.Spec.MerchantReference, first.Spec.IdempotencyKey = "order-1", "key-1"
	first.Finalizers = []string{v1alpha1.FinalizerMoneyInFlight}
	del := metav1.NewTime(t0.Add(time.Second))
	first.DeletionTimestamp = &del
	second := newPay("order-1-v2")
	second.Spec.MerchantReference, second.Spec.IdempotencyKey = "order-1", "key-1"
	second.CreationTimestamp = metav1.NewTime(t0.Add(2 * time.Second))
	all := []v1alpha1.Payment{*first, *second}
	if owner := payment.ReferenceOwner(second, all); owner != first.Name {
		t.Errorf("reference owner %q while the deleted first attempt may still charge", owner)
	}
	if owner := payment.KeyOwner(second, all); owner != first.Name {
		t.Errorf("key owner %q while the deleted first attempt may still charge", owner)
	}
	all[0].Finalizers = nil // let go: settled and remembered
	if owner := payment.ReferenceOwner(second, all); owner != "" {
		t.Errorf("a let-go Payment still owns the reference")
	}
}

// An object let go before its final answer (deleted with its provider) is
// remembered as unsettled: the same manifest applied again sends nothing and
// waits for a human; another attempt at the order is a duplicate.
func TestAnUnsettledRecordSendsNothing(t *testing.T) {
	pending := created("order-1")
	rec := payment.UnsettledRecord(pending, t0)
	if rec.Phase != string(v1alpha1.PhasePending) || rec.ProviderID != "pay_1" || !rec.TookMoney() {
		t.Fatalf("unsettled record %+v", rec)
	}
	for _, name := range []string{"order-1", "order-1-retry"} {
		p := newPay(name)
		p.UID = "new"
		if name != "order-1" {
			p.Spec.MerchantReference = pending.MerchantRef()
		}
		step := payment.Plan(p, testPolicy(), payment.Facts{Ledger: []payment.LedgerRecord{rec}}, t0.Add(time.Hour))
		got := store(p, step.Outcome)
		if step.Action != payment.Write || got.Status.CreateRequestedAt != nil || got.Status.Phase != v1alpha1.PhaseUnknown || review(got) == "" || got.Status.Query.NextTime != nil {
			t.Errorf("%s after an unsettled record: %s, %+v", name, step.Action, got.Status)
		}
	}
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r1", UID: "old"},
		Spec:   v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order-1"}, Amount: &v1alpha1.Amount{Value: 500, Currency: "USD"}},
		Status: v1alpha1.RefundStatus{Phase: v1alpha1.RefundPending, CreateRequestedAt: &metav1.Time{Time: t0}}}
	rrec := payment.UnsettledRefundRecord(rf, t0)
	again := rf.DeepCopy()
	again.UID, again.Status = "new", v1alpha1.RefundStatus{}
	out, ok := payment.AdoptRefund(again, []payment.LedgerRecord{rrec}, t0)
	if !ok || out.Status.Phase != v1alpha1.RefundUnknown || out.Status.CreateRequestedAt != nil {
		t.Errorf("a Refund after an unsettled one: %v %+v", ok, out.Status)
	}
}

// A restored copy that cannot be proven new is never sent again: a charge at
// a provider that cannot be searched, a Refund the ledger does not know.
func TestRestoredCopiesThatCannotBeProvenNewSendNothing(t *testing.T) {
	pol := testPolicy()
	charge := newPay("order-1")
	charge.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{PaymentMethod: "pm_1"}
	charge.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "the-first-object"}
	if s := planned(charge, pol, t0); s.Action != payment.Lookup {
		t.Fatalf("restored charge: %s", s.Action)
	}
	got := store(charge, payment.AfterLookup(charge, pol, fails(errUnsupported), t0))
	if got.Status.CreateRequestedAt != nil || got.Status.Phase != v1alpha1.PhaseUnknown || review(got) != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Errorf("a restored charge at a provider without search: %+v", got.Status)
	}

	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r1", UID: "restored",
		Annotations: map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1"}},
		Spec: v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order-1"}, Amount: &v1alpha1.Amount{Value: 500, Currency: orderCurrency}}}
	step := payment.PlanRefund(rf, pol, payment.RefundFacts{Payment: settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0)}, t0)
	if step.Action != payment.Write || step.Outcome.Status.CreateRequestedAt != nil || step.Outcome.Status.Phase != v1alpha1.RefundUnknown {
		t.Errorf("a restored Refund: %s %+v", step.Action, step.Outcome.Status)
	}
	rf.Annotations[v1alpha1.AnnotationMoneyUID] = "restored" // its own: held in this life, not restored
	if step := payment.PlanRefund(rf, pol, payment.RefundFacts{Payment: settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0)}, t0); step.Outcome.Status.CreateRequestedAt == nil {
		t.Errorf("a Refund held by itself is not sent: %s %s", step.Action, step.Why)
	}
}

// TestADeletedObjectWaitingOnAHumanNamesTheCommand: the DeletionWaits Event
// of an object kept for a human's decision says which kubectl paywarden
// command takes it.
func TestADeletedObjectWaitingOnAHumanNamesTheCommand(t *testing.T) {
	p := newPay("order-1")
	p.Namespace = "shop"
	p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseUnknown, ProviderPaymentID: "pay_1", WaitingFor: "Review:AmountMismatch"}
	if got := payment.InFlight(p); !strings.Contains(got, "kubectl paywarden resolve order-1 -n shop") {
		t.Errorf("a payment in review waits for %q, want the resolve command", got)
	}
	p.Status.Phase = v1alpha1.PhaseAuthorized
	if got := payment.InFlight(p); !strings.Contains(got, "kubectl paywarden capture|cancel order-1 -n shop") {
		t.Errorf("an authorized payment waits for %q, want the capture and cancel commands", got)
	}
	rf := &v1alpha1.Refund{}
	rf.Name, rf.Namespace = "order-1-r1", "shop"
	rf.Status = v1alpha1.RefundStatus{Phase: v1alpha1.RefundUnknown, CreateRequestedAt: &metav1.Time{Time: t0}, ProviderRefundID: "re_1"}
	if got := payment.RefundInFlight(rf); !strings.Contains(got, "kubectl paywarden resolve refund/order-1-r1 -n shop") {
		t.Errorf("a refund in review waits for %q, want the resolve command", got)
	}
}

// TestEventWaits: an event resolved to a payment by its order's merchant
// reference waits while the payment cannot tell its own news from an
// earlier object's: before it started, and while its create is out and
// unanswered (no provider id to compare). It applies once the payment has
// an id (answered, tracked, a checkout's), and when the create's outcome
// stays unknown (the event may be what settles it).
func TestEventWaits(t *testing.T) {
	marker := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name string
		set  func(p *v1alpha1.Payment)
		want bool
	}{
		{"not started", func(p *v1alpha1.Payment) {}, true},
		{"create marked, no phase yet", func(p *v1alpha1.Payment) { p.Status.CreateRequestedAt = &marker }, true},
		{"create out, Pending, unanswered", func(p *v1alpha1.Payment) {
			p.Status.CreateRequestedAt, p.Status.Phase = &marker, v1alpha1.PhasePending
		}, true},
		{"create answered", func(p *v1alpha1.Payment) {
			p.Status.CreateRequestedAt, p.Status.Phase, p.Status.ProviderPaymentID = &marker, v1alpha1.PhasePending, "pay_1"
		}, false},
		{"a checkout awaiting its payment", func(p *v1alpha1.Payment) {
			p.Status.CreateRequestedAt, p.Status.Phase = &marker, v1alpha1.PhasePending
			p.Status.ProviderPaymentID, p.Status.CheckoutID = "cs_1", "cs_1"
		}, false},
		{"create outcome unknown", func(p *v1alpha1.Payment) {
			p.Status.CreateRequestedAt, p.Status.Phase = &marker, v1alpha1.PhaseUnknown
		}, false},
		{"create refused", func(p *v1alpha1.Payment) {
			p.Status.CreateRequestedAt, p.Status.Phase = &marker, v1alpha1.PhaseFailed
		}, false},
		{"tracked", func(p *v1alpha1.Payment) { p.Spec.ProviderPaymentID = "pay_elsewhere" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Payment{}
			p.Name = "order"
			tc.set(p)
			if got := payment.EventWaits(p); (got != "") != tc.want {
				t.Fatalf("EventWaits = %q, want waiting %v", got, tc.want)
			}
		})
	}
}

// TestLedgerRecordTookMoney: a record moved money (or may have) unless its
// object ended in a phase that frees its order: a Payment Failed, Expired or
// Canceled, a Refund Failed. The ledger drops the others last, and never one
// for another record of the same identity.
func TestLedgerRecordTookMoney(t *testing.T) {
	for _, tc := range []struct {
		kind, phase string
		took        bool
	}{
		{payment.LedgerPayment, string(v1alpha1.PhaseSucceeded), true},
		{payment.LedgerPayment, string(v1alpha1.PhasePartiallyRefunded), true},
		{payment.LedgerPayment, string(v1alpha1.PhaseRefunded), true},
		{payment.LedgerPayment, string(v1alpha1.PhaseAuthorized), true},
		{payment.LedgerPayment, string(v1alpha1.PhaseUnknown), true},
		{payment.LedgerPayment, string(v1alpha1.PhasePending), true},
		{payment.LedgerPayment, string(v1alpha1.PhaseFailed), false},
		{payment.LedgerPayment, string(v1alpha1.PhaseExpired), false},
		{payment.LedgerPayment, string(v1alpha1.PhaseCanceled), false},
		{payment.LedgerRefund, string(v1alpha1.RefundSucceeded), true},
		{payment.LedgerRefund, string(v1alpha1.RefundPending), true},
		{payment.LedgerRefund, string(v1alpha1.RefundUnknown), true},
		{payment.LedgerRefund, string(v1alpha1.RefundFailed), false},
	} {
		if got := (payment.LedgerRecord{Kind: tc.kind, Phase: tc.phase}).TookMoney(); got != tc.took {
			t.Errorf("%s %s: TookMoney %v, want %v", tc.kind, tc.phase, got, tc.took)
		}
	}
}
