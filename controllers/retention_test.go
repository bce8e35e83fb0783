package controllers_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/payment"
)

// settled describes a payment's stored state for the retention tests.
type settled struct {
	phase       v1alpha1.PaymentPhase
	history     []time.Duration // ages of the history entries, oldest first
	needsReview bool
}

// storedPayment creates a Payment of prov and stores st as its status.
func storedPayment(t *testing.T, ns, name, prov string, now time.Time, st settled) *v1alpha1.Payment {
	t.Helper()
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: prov},
			Amount:      v1alpha1.Amount{Value: 1999, Currency: "USD"},
		},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return fixture.SetStatus(t, env.Client, p, func(s *v1alpha1.PaymentStatus) {
		s.Phase = st.phase
		from := v1alpha1.PhasePending
		for i, age := range st.history {
			to := st.phase
			if i < len(st.history)-1 {
				to = v1alpha1.PhaseSucceeded // refunds follow a success
			}
			s.History = append(s.History, v1alpha1.HistoryEntry{Time: metav1.NewTime(now.Add(-age)), From: from, To: to, Source: v1alpha1.SourceWebhook})
			from = to
		}
		if st.needsReview {
			s.Conditions = append(s.Conditions, metav1.Condition{
				Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConflictingStatus,
				Message: "provider said Succeeded after Failed", LastTransitionTime: metav1.NewTime(now),
			})
		}
	})
}

// keepsAnHour is a namespace of its own with a provider whose final payments
// are kept for an hour, and the time a test judges them at.
func keepsAnHour(t *testing.T) (ns string, prov *v1alpha1.PaymentProvider, now time.Time) {
	t.Helper()
	ns = fixture.Namespace(t, env.Client, "pay")
	prov = fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "keeps-1h", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = fixture.Duration("1h")
	}})
	return ns, prov, time.Now().Truncate(time.Second)
}

func exists(t *testing.T, ns, name string) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.Payment{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func remaining(t *testing.T, ns string) []string {
	t.Helper()
	var l v1alpha1.PaymentList
	if err := env.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range l.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// TestRetentionDeletesExactlyWhatHasExpired judges each payment on a fake
// clock: only final payments past retention.finalPayments since their last
// change go, and never one that needs review.
func TestRetentionDeletesExactlyWhatHasExpired(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	now := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(now)
	keep := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "keeps-1h", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = fixture.Duration("1h")
	}})
	// Without retention.finalPayments the API server fills in the default.
	dflt := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "default-retention", Quiet: true})
	dfltKeep := v1alpha1.DefaultFinalRetention
	r := &controllers.Retention{Client: env.Client, APIReader: env.Client, Clock: clk, Recorder: &fixture.EventLog{}}

	cases := []struct {
		name        string
		provider    string
		st          settled
		wantDeleted bool
		wantWait    time.Duration
	}{
		{name: "succeeded-2h-ago-is-deleted", provider: keep.Name, st: settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{2 * time.Hour}}, wantDeleted: true},
		{name: "expired-2h-ago-is-deleted", provider: keep.Name, st: settled{phase: v1alpha1.PhaseExpired, history: []time.Duration{2 * time.Hour}}, wantDeleted: true},
		{name: "succeeded-30m-ago-waits-30m", provider: keep.Name, st: settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{30 * time.Minute}}, wantWait: 30 * time.Minute},
		{name: "refunded-10m-ago-counts-from-the-refund", provider: keep.Name, st: settled{phase: v1alpha1.PhaseRefunded, history: []time.Duration{3 * time.Hour, 10 * time.Minute}}, wantWait: 50 * time.Minute},
		{name: "failed-needing-review-is-kept", provider: keep.Name, st: settled{phase: v1alpha1.PhaseFailed, history: []time.Duration{2 * time.Hour}, needsReview: true}},
		{name: "unknown-is-not-final", provider: keep.Name, st: settled{phase: v1alpha1.PhaseUnknown, history: []time.Duration{2 * time.Hour}, needsReview: true}},
		{name: "processing-is-not-final", provider: keep.Name, st: settled{phase: v1alpha1.PhaseProcessing, history: []time.Duration{2 * time.Hour}}},
		{name: "succeeded-just-now-waits-the-hour", provider: keep.Name, st: settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{0}}, wantWait: time.Hour},
		// Its end is days off, beyond the horizon: it waits in no queue
		// (the scan brings it back, TestRetentionScanHandsBackWhatEndsWithinTheHorizon).
		{name: "default-retention-keeps-a-day-old-one", provider: dflt.Name, st: settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{24 * time.Hour}}},
		{name: "default-retention-deletes-past-it", provider: dflt.Name, st: settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{dfltKeep + time.Second}}, wantDeleted: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			storedPayment(t, ns, tc.name, tc.provider, now, tc.st)
			res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: tc.name}})
			if err != nil {
				t.Fatal(err)
			}
			if gone := !exists(t, ns, tc.name); gone != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v", gone, tc.wantDeleted)
			}
			if res.RequeueAfter != tc.wantWait {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, tc.wantWait)
			}
		})
	}

	// 31 minutes later the 30-minute-old one has expired too; the refund has not.
	clk.SetTime(now.Add(31 * time.Minute))
	for _, name := range []string{"succeeded-30m-ago-waits-30m", "refunded-10m-ago-counts-from-the-refund", "failed-needing-review-is-kept"} {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	// An operator reviews the failed payment: now it may go.
	fixture.SetStatus(t, env.Client, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "failed-needing-review-is-kept"}}, func(s *v1alpha1.PaymentStatus) {
		s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonReviewed
	})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "failed-needing-review-is-kept"}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"default-retention-keeps-a-day-old-one", "processing-is-not-final", "refunded-10m-ago-counts-from-the-refund", "succeeded-just-now-waits-the-hour", "unknown-is-not-final"}
	if got := remaining(t, ns); !slices.Equal(got, want) {
		t.Errorf("remaining payments %v, want %v", got, want)
	}
}

// A payment past retention with a Refund still in flight is kept, even when
// the Refund was applied a moment ago (retention asks the API server, not a
// cache that may not hold it yet); once the Refund is final the payment goes.
func TestRetentionKeepsAPaymentWithARefundInFlight(t *testing.T) {
	t.Parallel()
	ns, keep, now := keepsAnHour(t)
	// A cache that never sees any Refund: retention must not rely on it.
	blind := fixture.Intercept(env.Client, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		if _, ok := l.(*v1alpha1.RefundList); ok {
			return nil
		}
		return c.List(ctx, l, opts...)
	}})
	r := &controllers.Retention{Client: blind, APIReader: env.Client, Clock: clocktesting.NewFakePassiveClock(now), Recorder: &fixture.EventLog{}}
	storedPayment(t, ns, "paid", keep.Name, now, settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{2 * time.Hour}})
	storedPayment(t, ns, "other", keep.Name, now, settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{2 * time.Hour}})
	rf := &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "return"},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "paid"}},
	}
	if err := env.Client.Create(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	reconcileBoth := func() {
		for _, name := range []string{"paid", "other"} {
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reconcileBoth()
	if !exists(t, ns, "paid") {
		t.Fatal("deleted a payment whose Refund is in flight")
	}
	if exists(t, ns, "other") {
		t.Fatal("a Refund of another payment kept this one")
	}
	rf.Status.Phase = v1alpha1.RefundProcessing
	if err := env.Client.Status().Update(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	reconcileBoth()
	if !exists(t, ns, "paid") {
		t.Fatal("deleted a payment whose Refund is Processing")
	}
	rf.Status.Phase = v1alpha1.RefundSucceeded
	if err := env.Client.Status().Update(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	reconcileBoth()
	if exists(t, ns, "paid") {
		t.Fatal("kept a payment whose only Refund is final")
	}
}

// TestRetentionControllerWaitsForEachPayment runs the controller: a payment
// is deleted when its own retention passes, one under review stays, and a
// provider that starts keeping less applies it to payments settled before.
func TestRetentionControllerWaitsForEachPayment(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	short := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "short", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = fixture.Duration("1s")
	}})
	later := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "later", Quiet: true})
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerRetention))
	now := time.Now()
	storedPayment(t, ns, "settled", short.Name, now, settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{0}})
	storedPayment(t, ns, "under-review", short.Name, now, settled{phase: v1alpha1.PhaseFailed, history: []time.Duration{0}, needsReview: true})
	storedPayment(t, ns, "of-later", later.Name, now, settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{time.Hour}})

	fixture.Eventually(t, 10*time.Second, "the settled payment to be deleted", func() bool { return !exists(t, ns, "settled") })
	if !exists(t, ns, "of-later") {
		t.Fatal("deleted an hour-old payment of a provider with the default retention")
	}
	p := fixture.GetProvider(t, env.Client, ns, later.Name)
	p.Spec.Retention.FinalPayments = fixture.Duration("30m")
	if err := env.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, "the provider's new retention to apply", func() bool { return !exists(t, ns, "of-later") })
	if !exists(t, ns, "under-review") {
		t.Error("deleted a payment that needs review")
	}
}

// TestRetentionScanHandsBackWhatEndsWithinTheHorizon: a final payment whose
// retention ends beyond the horizon waits in no queue; the scan hands it
// back once its end is within the horizon, and it is deleted on time. Held
// in the queue from its settling instead, it would be deleted too, but the
// queue would hold every payment retention keeps; never handed back, it
// would never be deleted.
func TestRetentionScanHandsBackWhatEndsWithinTheHorizon(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "retention-scan")
	const keep, horizon = 6 * time.Second, 2 * time.Second
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "keeps-6s", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = &metav1.Duration{Duration: keep}
	}})
	o := fixture.Run(controllers.ControllerRetention)
	o.RetentionHorizon = horizon
	m := fixture.StartManager(t, env, ns, o)
	fixture.WaitCached(t, m.Client(), prov)

	long := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "keeps-1h", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = fixture.Duration("1h")
	}})
	fixture.WaitCached(t, m.Client(), long)
	mark := m.Reconciles.Mark()
	kept := storedPayment(t, ns, "kept", long.Name, time.Now(), settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{0}})
	held := storedPayment(t, ns, "held", prov.Name, time.Now(), settled{phase: v1alpha1.PhaseFailed, history: []time.Duration{0}, needsReview: true})
	// Past its end, kept by a Refund in flight: the Refund's settling wakes
	// it, not the scan (each judgement of it lists Refunds from the API
	// server).
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-flight"}, Spec: v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "owed"}}}
	if err := env.Client.Create(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	owed := storedPayment(t, ns, "owed", prov.Name, time.Now(), settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{time.Hour}})
	p := storedPayment(t, ns, "paid", prov.Name, time.Now(), settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{0}})
	end := payment.RetentionSince(p).Add(keep)
	fixture.Eventually(t, fixture.Timeout, "the payment deleted past its retention", func() (bool, string) {
		return !exists(t, ns, p.Name), "still there"
	})
	switch late := -time.Until(end); {
	case late < 0:
		t.Fatalf("deleted %s before its retention ended", -late)
	case late > 3*time.Second:
		// Handed back within the horizon, it waits for its end to the
		// second; a scan that came late would delete it late.
		t.Fatalf("deleted %s after its retention ended", late)
	}
	// The scan ran a dozen times meanwhile; neither the payment kept for an
	// hour, nor the one under review (its review's end wakes it), nor the one
	// a Refund keeps was handed back: each was reconciled when it settled
	// (and perhaps once more for its provider's creation), and scheduled
	// nothing.
	for _, o := range []*v1alpha1.Payment{kept, held, owed} {
		rs := m.Reconciles.Since(mark, controllers.ControllerRetention, o)
		if len(rs) == 0 || len(rs) > 2 || slices.ContainsFunc(rs, fixture.Reconcile.Scheduled) {
			t.Fatalf("%s was reconciled %d times (%+v); want once or twice, scheduling nothing", o.Name, len(rs), rs)
		}
	}
	if !exists(t, ns, held.Name) || !exists(t, ns, owed.Name) {
		t.Fatal("deleted a payment under review or with a Refund in flight")
	}
}
