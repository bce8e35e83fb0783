package inbox

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// A refund event settles the Refund it was made for, never another object of
// the same name: "r1" asked 500 and succeeded, was deleted and created again
// asking 300; the old refund's event (redelivered, backfilled, or stored
// Orphaned and processed again) must leave the new "r1" alone.

const (
	ns     = "shop"
	oldUID = "0a1b2c3d-0000-4000-8000-000000000001"
	newUID = "0a1b2c3d-0000-4000-8000-000000000002"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newFakeInbox(t *testing.T, objs ...client.Object) (*Inbox, client.Client) {
	t.Helper()
	c := fakeAPI(t, objs...)
	return &Inbox{Client: c, Reader: c, APIReader: c, Clock: clocktesting.NewFakePassiveClock(t0)}, c
}

// fakeAPI is a fake client holding objs, with the inbox's indexes as
// SetupIndexes registers them.
func fakeAPI(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := &builderIndexer{fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.Payment{}, &v1alpha1.Refund{}, &v1alpha1.WebhookEvent{})}
	if err := SetupIndexes(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// builderIndexer registers a cache's indexes on a fake client instead.
type builderIndexer struct{ *fake.ClientBuilder }

func (b *builderIndexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	b.ClientBuilder = b.WithIndex(obj, field, extract)
	return nil
}

func paidOrder() *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order", UID: "pay-uid"},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"},
			Amount:      v1alpha1.Amount{Value: 1999, Currency: "USD"},
		},
		Status: v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseSucceeded, ProviderPaymentID: "pay_1"},
	}
}

// r1 is Refund "r1" of the order with uid, asking amount; in flight (its
// marker stored, no answer yet) like a Refund whose call is out.
func r1(uid string, amount int64) *v1alpha1.Refund {
	return &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1alpha1.RefundSpec{
			PaymentRef: v1alpha1.LocalObjectReference{Name: "order"},
			Amount:     &v1alpha1.Amount{Value: amount, Currency: "USD"},
		},
		Status: v1alpha1.RefundStatus{
			Phase:              v1alpha1.RefundPending,
			Amount:             &v1alpha1.Money{Value: amount, Currency: "USD"},
			ProviderPaymentID:  "pay_1",
			CreateRequestedAt:  &metav1.Time{Time: t0},
			ObservedGeneration: 1,
		},
	}
}

// refundSucceeded is the provider's refund.succeeded for refund id of amount,
// made under reference; the payment's refunded total is total.
func refundSucceeded(eventID, id, reference string, amount, total int64) provider.Event {
	return provider.Event{
		ID: eventID, Type: "refund.succeeded", Status: provider.StatusRefund, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", Currency: "USD", RefundedTotal: total,
		Refund: &provider.Refund{ID: id, PaymentID: "pay_1", Reference: reference, Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: amount, Currency: "USD"},
		Raw:    []byte(`{"id":"` + eventID + `"}`),
	}
}

// deliver stores ev as the inbox does and applies it.
func deliver(t *testing.T, in *Inbox, c client.Client, ev provider.Event) (Outcome, *v1alpha1.WebhookEvent) {
	t.Helper()
	prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"}}
	evt, err := NewEvent(prov, ev, v1alpha1.ViaWebhook, "kukopay", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), evt); err != nil {
		t.Fatal(err)
	}
	return apply(t, in, evt, ev)
}

func apply(t *testing.T, in *Inbox, evt *v1alpha1.WebhookEvent, ev provider.Event) (Outcome, *v1alpha1.WebhookEvent) {
	t.Helper()
	out, err := in.Apply(context.Background(), evt, ev)
	if err != nil {
		t.Fatalf("apply %s: %v", ev.ID, err)
	}
	return out, evt
}

func getRefund(t *testing.T, c client.Client) *v1alpha1.Refund {
	t.Helper()
	rf := &v1alpha1.Refund{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "r1"}, rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

// untouched fails unless the new r1 is still in flight for its own 300.
func untouched(t *testing.T, c client.Client) {
	t.Helper()
	rf := getRefund(t, c)
	if rf.Status.Phase != v1alpha1.RefundPending || rf.Status.Amount.Value != 300 || rf.Status.ProviderRefundID != "" || len(rf.Status.RecentEventIDs) != 0 {
		t.Errorf("the new r1 was moved by the old r1's event: phase %s, amount %+v, provider refund %q, events %v",
			rf.Status.Phase, rf.Status.Amount, rf.Status.ProviderRefundID, rf.Status.RecentEventIDs)
	}
}

func TestAnEarlierRefundsEventNeverSettlesARefundOfTheSameName(t *testing.T) {
	for _, tc := range []struct {
		name, reference string
	}{
		{"reference naming the old uid", ns + "/r1/" + oldUID},
		// What paywarden sent before references named the uid: it names no
		// Refund, however its name reads.
		{"reference without a uid", ns + "/r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, c := newFakeInbox(t, paidOrder(), r1(newUID, 300))
			out, _ := deliver(t, in, c, refundSucceeded("evt-old", "re_old", tc.reference, 500, 500))
			untouched(t, c)
			if !out.Result.IsDone() || out.Result == v1alpha1.ResultOrphaned {
				t.Errorf("result %s (%s), want the payment's result: no Refund waits for it", out.Result, out.Message)
			}
			p := &v1alpha1.Payment{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "order"}, p); err != nil {
				t.Fatal(err)
			}
			// The payment still counts the old refund in its refunded total.
			if a := p.Status.AmountRefunded; a == nil || a.Value != 500 || p.Status.Phase != v1alpha1.PhasePartiallyRefunded {
				t.Errorf("payment %s refunded %+v, want PartiallyRefunded 500", p.Status.Phase, p.Status.AmountRefunded)
			}
		})
	}
	t.Run("the message says whose refund it was", func(t *testing.T) {
		in, c := newFakeInbox(t, paidOrder(), r1(newUID, 300))
		out, _ := deliver(t, in, c, refundSucceeded("evt-old", "re_old", ns+"/r1/"+oldUID, 500, 500))
		if out.Result != v1alpha1.ResultApplied || !strings.Contains(out.Message, "earlier Refund r1 (uid "+oldUID+")") {
			t.Errorf("result %s, message %q", out.Result, out.Message)
		}
	})
}

func TestAnOrphanedEventOfAnEarlierRefundIsNotTakenByItsSuccessor(t *testing.T) {
	// The old r1's event arrives while no r1 exists (it was deleted): it
	// waits, Orphaned, for the Refund it names.
	in, c := newFakeInbox(t, paidOrder())
	ev := refundSucceeded("evt-old", "re_old", ns+"/r1/"+oldUID, 500, 500)
	out, evt := deliver(t, in, c, ev)
	if out.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("result %s (%s), want Orphaned while no Refund r1 exists", out.Result, out.Message)
	}
	// r1 is created again asking 300; the inbox processor re-applies the
	// waiting event.
	if err := c.Create(context.Background(), r1(newUID, 300)); err != nil {
		t.Fatal(err)
	}
	rf := getRefund(t, c)
	rf.Status = r1(newUID, 300).Status
	if err := c.Status().Update(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(evt), evt); err != nil {
		t.Fatal(err)
	}
	out, _ = apply(t, in, evt, ev)
	untouched(t, c)
	if out.Result == v1alpha1.ResultOrphaned || !out.Result.IsDone() {
		t.Errorf("re-processed: result %s (%s), want done: the Refund it waited for is gone", out.Result, out.Message)
	}
}

func TestARefundEventSettlesTheRefundWhoseUIDItNames(t *testing.T) {
	in, c := newFakeInbox(t, paidOrder(), r1(newUID, 300))
	out, _ := deliver(t, in, c, refundSucceeded("evt-new", "re_new", ns+"/r1/"+newUID, 300, 300))
	rf := getRefund(t, c)
	if out.Result != v1alpha1.ResultApplied || rf.Status.Phase != v1alpha1.RefundSucceeded || rf.Status.ProviderRefundID != "re_new" || rf.Status.Amount.Value != 300 {
		t.Errorf("result %s (%s); refund %s %+v %q", out.Result, out.Message, rf.Status.Phase, rf.Status.Amount, rf.Status.ProviderRefundID)
	}
	// Before the Refund exists (not in the cache yet), the event waits for it.
	in, c = newFakeInbox(t, paidOrder())
	out, evt := deliver(t, in, c, refundSucceeded("evt-new", "re_new", ns+"/r1/"+newUID, 300, 300))
	if out.Result != v1alpha1.ResultOrphaned || !strings.Contains(out.Message, "waiting for Refund "+ns+"/r1/"+newUID) {
		t.Fatalf("result %s (%s), want Orphaned", out.Result, out.Message)
	}
	if err := c.Create(context.Background(), r1(newUID, 300)); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(evt), evt); err != nil {
		t.Fatal(err)
	}
	out, _ = apply(t, in, evt, refundSucceeded("evt-new", "re_new", ns+"/r1/"+newUID, 300, 300))
	if rf := getRefund(t, c); out.Result != v1alpha1.ResultApplied || rf.Status.Phase != v1alpha1.RefundSucceeded {
		t.Errorf("re-processed: result %s (%s); refund %s", out.Result, out.Message, rf.Status.Phase)
	}
}

// TestARefundEventIsNotClosedOnACacheThatStillHoldsTheOldRefund: the event
// names the new r1's UID while the cache still holds the old r1 under that
// name; the API server has the new one, so the event settles it.
func TestARefundEventIsNotClosedOnACacheThatStillHoldsTheOldRefund(t *testing.T) {
	in, c := newFakeInbox(t, paidOrder(), r1(newUID, 300))
	stale, _ := newFakeInbox(t, paidOrder(), r1(oldUID, 500))
	in.Reader = stale.Reader
	out, _ := deliver(t, in, c, refundSucceeded("evt-new", "re_new", ns+"/r1/"+newUID, 300, 300))
	if rf := getRefund(t, c); out.Result != v1alpha1.ResultApplied || rf.Status.Phase != v1alpha1.RefundSucceeded || rf.Status.ProviderRefundID != "re_new" {
		t.Errorf("result %s (%s); refund %s %q", out.Result, out.Message, rf.Status.Phase, rf.Status.ProviderRefundID)
	}
}

// A refund event finds its Refund without paywarden's reference: by the
// provider's refund id the Refund recorded (a provider that does not echo
// the reference), or, when the reference's name was cut to fit, by the UID
// among the payment's Refunds (the cut name names no object).
func TestARefundEventFindsItsRefundWithoutItsName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		refund    func() *v1alpha1.Refund
		reference func(rf *v1alpha1.Refund) string
	}{
		{"by the provider's refund id, without a reference", func() *v1alpha1.Refund {
			rf := r1(newUID, 300)
			rf.Status.ProviderRefundID = "re_new"
			return rf
		}, func(*v1alpha1.Refund) string { return "" }},
		{"by the UID of a reference whose name was cut", func() *v1alpha1.Refund {
			rf := r1(newUID, 300)
			rf.Name = strings.Repeat("r", 120)
			return rf
		}, (*v1alpha1.Refund).Reference},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf := tc.refund()
			in, c := newFakeInbox(t, paidOrder(), rf)
			out, _ := deliver(t, in, c, refundSucceeded("evt-new", "re_new", tc.reference(rf), 300, 300))
			got := &v1alpha1.Refund{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(rf), got); err != nil {
				t.Fatal(err)
			}
			if out.Result != v1alpha1.ResultApplied || got.Status.Phase != v1alpha1.RefundSucceeded {
				t.Errorf("result %s (%s); refund %s", out.Result, out.Message, got.Status.Phase)
			}
		})
	}
}
