package inbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// An event that names only a provider payment id two Payments share is
// applied to neither: it waits Orphaned, and no payment is moved on a guess.
func TestAnEventOfASharedProviderIDIsAppliedToNone(t *testing.T) {
	a, b := paidOrder(), paidOrder()
	b.Name, b.UID, b.Spec.MerchantReference = "order-b", "pay-uid-b", "order-b"
	for _, p := range []*v1alpha1.Payment{a, b} {
		p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, ProviderPaymentID: "pay_1"}
	}
	in, c := newFakeInbox(t, a, b)
	ev := provider.Event{ID: "evt-1", Type: "payment.failed", Status: provider.StatusFailed, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", Raw: []byte(`{"id":"evt-1"}`)}
	if out, _ := deliver(t, in, c, ev); out.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("result %s (%s), want Orphaned", out.Result, out.Message)
	}
	for _, p := range []*v1alpha1.Payment{a, b} {
		got := &v1alpha1.Payment{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1alpha1.PhaseProcessing {
			t.Errorf("payment %s moved to %s by an event that names it ambiguously", p.Name, got.Status.Phase)
		}
	}
}

// An event's result: a finished one stands whatever a later writer says; an
// unchanged Orphaned record is not written again (no attempt counted); a new
// result counts an attempt.
func TestEventResultWrites(t *testing.T) {
	ctx := context.Background()
	newEvent := func(t *testing.T, result v1alpha1.EventResult, msg string) (*Inbox, *v1alpha1.WebhookEvent, client.Client) {
		t.Helper()
		in, c := newFakeInbox(t)
		prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"}}
		evt, err := NewEvent(prov, provider.Event{ID: "evt-1", Type: "payment.succeeded", Raw: []byte(`{"id":"evt-1"}`)}, v1alpha1.ViaWebhook, "kukopay", t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, evt); err != nil {
			t.Fatal(err)
		}
		if result != "" {
			if err := in.setResult(ctx, evt, result, msg); err != nil {
				t.Fatal(err)
			}
		}
		return in, evt, c
	}
	stored := func(t *testing.T, c client.Client, evt *v1alpha1.WebhookEvent) v1alpha1.WebhookEventStatus {
		t.Helper()
		got := &v1alpha1.WebhookEvent{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(evt), got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	t.Run("a finished result stands", func(t *testing.T) {
		in, evt, c := newEvent(t, v1alpha1.ResultApplied, "applied")
		if err := in.setResult(ctx, evt, v1alpha1.ResultPending, "not applied at receipt"); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, c, evt); st.Result != v1alpha1.ResultApplied || st.Attempts != 1 || st.AppliedAt == nil || !st.AppliedAt.Time.Equal(t0) {
			t.Errorf("result %s after %d attempts, applied at %v; want Applied kept after 1, applied at %s", st.Result, st.Attempts, st.AppliedAt, t0)
		}
	})
	t.Run("an unchanged orphan is not written again", func(t *testing.T) {
		in, evt, c := newEvent(t, v1alpha1.ResultOrphaned, "no payment yet")
		if err := in.setResult(ctx, evt, v1alpha1.ResultOrphaned, "no payment yet"); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, c, evt); st.Attempts != 1 {
			t.Errorf("%d attempts, want 1: re-checking an orphan wrote it again", st.Attempts)
		}
		if err := in.setResult(ctx, evt, v1alpha1.ResultOrphaned, "still no payment, for another reason"); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, c, evt); st.Attempts != 2 || st.Message != "still no payment, for another reason" || st.AppliedAt != nil {
			t.Errorf("%d attempts, message %q, applied at %v; want 2, the new message, not applied", st.Attempts, st.Message, st.AppliedAt)
		}
	})
	t.Run("a message of exactly the limit is kept whole; a longer one is cut to it", func(t *testing.T) {
		in, evt, c := newEvent(t, "", "")
		whole := strings.Repeat("x", 1024) // the schema's limit
		if err := in.setResult(ctx, evt, v1alpha1.ResultOrphaned, whole); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, c, evt); st.Message != whole {
			t.Errorf("message of 1024 characters stored as %d: %q...", len(st.Message), st.Message[max(len(st.Message)-5, 0):])
		}
		if err := in.setResult(ctx, evt, v1alpha1.ResultOrphaned, whole+"y"); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, c, evt); len(st.Message) != 1024 || !strings.HasSuffix(st.Message, "...") {
			t.Errorf("message of 1025 characters stored as %d, want cut to 1024 ending in ...", len(st.Message))
		}
	})
	t.Run("a long message is cut where a rune starts, so an unchanged orphan is still not written again", func(t *testing.T) {
		// A cut inside a rune is stored with U+FFFD in its place (the JSON
		// encoding replaces the broken bytes), so the record would never
		// equal the message again and every re-check would write it.
		in, evt, c := newEvent(t, "", "")
		msg := "no payment with merchant reference: " + strings.Repeat("é", 600) // a rune straddles byte 1021
		for range 2 {
			if err := in.setResult(ctx, evt, v1alpha1.ResultOrphaned, msg); err != nil {
				t.Fatal(err)
			}
		}
		st := stored(t, c, evt)
		if !utf8.ValidString(st.Message) || strings.ContainsRune(st.Message, utf8.RuneError) || len(st.Message) > 1024 || !strings.HasSuffix(st.Message, "é...") {
			t.Errorf("message stored as %d bytes ending %q, want valid text of at most 1024 cut before a rune", len(st.Message), st.Message[max(len(st.Message)-8, 0):])
		}
		if st.Attempts != 1 {
			t.Errorf("%d attempts, want 1: re-checking an orphan with a long message wrote it again", st.Attempts)
		}
		// No rune starts anywhere in it: nothing of it is text to keep.
		if err := in.setResult(ctx, evt, v1alpha1.ResultOrphaned, strings.Repeat("\x80", 1100)); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, c, evt); st.Message != "..." {
			t.Errorf("a message of no text stored as %q, want only the ellipsis", st.Message[:min(len(st.Message), 8)])
		}
	})
}

// Receive's apply budget: 0 is no budget (the event is applied at
// receipt, as long as ctx allows); a spent one leaves the stored event
// Pending for the inbox processor, never lost.
func TestReceiveApplyBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget time.Duration
		result v1alpha1.EventResult
		phase  v1alpha1.PaymentPhase
	}{
		{"no budget: applied at receipt", 0, v1alpha1.ResultApplied, v1alpha1.PhaseFailed},
		{"a budget spent before the apply: left to the processor", time.Nanosecond, v1alpha1.ResultPending, v1alpha1.PhaseProcessing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := paidOrder()
			p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, ProviderPaymentID: "pay_1"}
			in, c := newFakeInbox(t, p)
			// The fake API server answers whatever the context; this one, as a
			// real one's client, refuses a request whose context is done.
			live := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					return c.Get(ctx, key, obj, opts...)
				},
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			})
			in.Client, in.Reader, in.APIReader = live, live, live
			prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"}}
			ev := provider.Event{ID: "evt-1", Type: "payment.failed", Status: provider.StatusFailed, Supported: true, OccurredAt: t0,
				PaymentID: "pay_1", Raw: []byte(`{"id":"evt-1"}`)}
			out, err := in.Receive(context.Background(), prov, ev, v1alpha1.ViaWebhook, "kukopay", tc.budget)
			if err != nil || out.Result != tc.result {
				t.Fatalf("result %s (%s) %v, want %s", out.Result, out.Message, err, tc.result)
			}
			got := &v1alpha1.Payment{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tc.phase {
				t.Errorf("payment %s, want %s", got.Status.Phase, tc.phase)
			}
		})
	}
}

// An event finds its Payment by merchant reference, else by the provider's
// payment id, and only among the provider's own Payments; where several
// match, the provider's id tells them apart or none is taken.
func TestResolve(t *testing.T) {
	payment := func(name, prov, ref, id string) *v1alpha1.Payment {
		p := paidOrder()
		p.Name, p.UID = name, types.UID("uid-"+name)
		p.Spec.ProviderRef.Name, p.Spec.MerchantReference = prov, ref
		p.Status.ProviderPaymentID = id
		return p
	}
	for _, tc := range []struct {
		name     string
		payments []*v1alpha1.Payment
		ref, id  string
		found    string // the payment found, if any
		orphaned string // else what the error says
	}{
		{name: "payments sharing a merchant reference are told apart by the provider's id",
			payments: []*v1alpha1.Payment{payment("a", "kukopay", "shared", "pay_a"), payment("b", "kukopay", "shared", "pay_b")},
			ref:      "shared", id: "pay_b", found: "b"},
		{name: "payments sharing a merchant reference, and no provider id to tell them apart: none",
			payments: []*v1alpha1.Payment{payment("a", "kukopay", "shared", "pay_a"), payment("b", "kukopay", "shared", "pay_b")},
			ref:      "shared", orphaned: `2 payments of provider kukopay share merchant reference "shared"`},
		{name: "the one payment of a merchant reference is taken whatever id the event names",
			payments: []*v1alpha1.Payment{payment("a", "kukopay", "order-a", "pay_a")},
			ref:      "order-a", id: "pay_other", found: "a"},
		{name: "a merchant reference no payment has: the provider's id finds it",
			payments: []*v1alpha1.Payment{payment("a", "kukopay", "order-a", "pay_a")},
			ref:      "order-unknown", id: "pay_a", found: "a"},
		{name: "an event naming the checkout a payment belongs to finds the payment",
			payments: []*v1alpha1.Payment{func() *v1alpha1.Payment {
				p := payment("a", "kukopay", "order-a", "pay_a")
				p.Status.CheckoutID = "cs_a"
				return p
			}()},
			id: "cs_a", found: "a"},
		{name: "payments sharing a provider id: none",
			payments: []*v1alpha1.Payment{payment("a", "kukopay", "order-a", "pay_1"), payment("b", "kukopay", "order-b", "pay_1")},
			id:       "pay_1", orphaned: `2 payments of provider kukopay share provider payment id "pay_1"`},
		{name: "another provider's payment of that merchant reference is never found",
			payments: []*v1alpha1.Payment{payment("a", "other", "order-a", "pay_a")},
			ref:      "order-a", orphaned: "no Payment of provider kukopay"},
		{name: "another provider's payment of that provider id is never found",
			payments: []*v1alpha1.Payment{payment("a", "other", "order-a", "pay_a")},
			id:       "pay_a", orphaned: "no Payment of provider kukopay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := make([]client.Object, 0, len(tc.payments))
			for _, p := range tc.payments {
				objs = append(objs, p)
			}
			in, _ := newFakeInbox(t, objs...)
			evt, err := NewEvent(testProvider, provider.Event{ID: "evt-1", Type: "payment.succeeded", Supported: true,
				MerchantReference: tc.ref, PaymentID: tc.id, Raw: []byte(`{"id":"evt-1"}`)}, v1alpha1.ViaWebhook, "kukopay", t0)
			if err != nil {
				t.Fatal(err)
			}
			p, err := in.resolve(context.Background(), evt)
			switch {
			case err == nil:
				if p.Name != tc.found {
					t.Errorf("found %s, want %s", p.Name, tc.found)
				}
			case !errors.Is(err, errNoPayment):
				t.Fatal(err)
			case tc.found != "" || !strings.Contains(err.Error(), tc.orphaned):
				t.Errorf("none found: %v; want %q", err, tc.found+tc.orphaned)
			}
		})
	}
}
