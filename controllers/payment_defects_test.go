package controllers_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/paysim"
)

// Regression tests of the reconciler's wiring for defects found where a
// decision used to live outside internal/payment. The decisions themselves
// are table-tested there (plan_test.go); these prove the I/O around them.

// isFind picks lookups by merchant reference.
func isFind(c fixture.Call) bool {
	return c.Method == http.MethodGet && strings.HasSuffix(c.Path, "/v1/payments")
}

// unresolvedCreate leaves p as an earlier manager would after a create whose
// outcome it could not find: Unknown, CreateOutcomeUnknown, the marker two
// hours old (past the provider's 1h key window), nothing scheduled.
func unresolvedCreate(t *testing.T, p *v1alpha1.Payment) {
	t.Helper()
	fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		marked := metav1.NewTime(time.Now().Add(-2 * time.Hour))
		st.Phase = v1alpha1.PhaseUnknown
		st.CreateRequestedAt = &marked
		st.Conditions = []metav1.Condition{{
			Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCreateOutcomeUnknown,
			Message: "set by the test", LastTransitionTime: marked,
		}}
	})
}

// TestRequeryOfAnUnresolvedCreateLooksUpOnce is defect 1: a requery of a
// payment in Unknown/CreateOutcomeUnknown whose lookup finds nothing used to
// requeue every 10 ms, spending the provider's whole rate limit on searches.
func TestRequeryOfAnUnresolvedCreateLooksUpOnce(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	kukopayAt(t, ns, fixture.Provider{Schedule: []string{"100ms", "100ms"}, KeyWindow: "1h", QPS: 100, Burst: 100})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "lost-create", Provider: "kukopay"})
	unresolvedCreate(t, p)
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationRequery, "1")
	fixture.Eventually(t, 10*time.Second, "the requery to be acted on and parked again", func() bool {
		got := fixture.GetPayment(t, env.Client, p)
		return got.Status.Actions.Requery == "1" && got.Status.Query.NextTime == nil && len(m.Requests.Calls(isFind)) > 0
	})
	// A hot loop made dozens of searches a second: it is a rate, so real
	// time must pass for it to show. Let one run its course.
	time.Sleep(2 * time.Second)
	if n := len(m.Requests.Calls(isFind)); n != 1 {
		t.Fatalf("%d lookups for one requery, want 1", n)
	}
	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhaseUnknown || meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview).Reason != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Errorf("phase %s review %+v", got.Status.Phase, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview))
	}
	if n := len(m.Requests.Calls(fixture.IsPost)); n != 0 {
		t.Errorf("%d creates past the key window", n)
	}
}

// TestRequeryFindsTheLostPaymentAndFollowsIt: the variant where the lookup
// finds the payment still pending — its id is recorded and its schedule runs.
func TestRequeryFindsTheLostPaymentAndFollowsIt(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"100ms", "100ms", "100ms"}, KeyWindow: "1h"})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "found-later", Provider: "kukopay"})
	id := fixture.SimCreate(t, s, v1alpha1.ProviderKukoPay, ns+".found-later", paysim.OutcomeProcessing)
	unresolvedCreate(t, p)
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationRequery, "1")
	// Still Unknown (only a final answer or an operator takes it out), but
	// now with the id and a schedule.
	fixture.Eventually(t, 10*time.Second, "the found id to be recorded", func() bool { return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID == id })
	fixture.Eventually(t, 10*time.Second, "status queries of the found payment", func() bool {
		return s.Counters().QueriesByPayment[id] >= 2
	})
	if n := len(m.Requests.Calls(isFind)); n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
}

// TestRecreatedPaymentIsNeverDecidedOnFromTheOldObject is defect 8: a
// Payment deleted and created again under the same name while the cache
// still holds the old one. The reconciler must neither panic nor call the
// provider nor write the old object's decisions onto the new one.
func TestRecreatedPaymentIsNeverDecidedOnFromTheOldObject(t *testing.T) {
	t.Parallel()
	for _, marked := range []bool{true, false} {
		name := map[bool]string{true: "old-marked", false: "old-unmarked"}[marked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := fixture.Namespace(t, env.Client, "pay")
			kukopayAt(t, ns, fixture.Provider{})
			old := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: "kukopay"})
			if marked {
				fixture.SetStatus(t, env.Client, old, func(st *v1alpha1.PaymentStatus) {
					now := metav1.Now()
					st.Phase, st.CreateRequestedAt = v1alpha1.PhasePending, &now
				})
			}
			stale := fixture.GetPayment(t, env.Client, old)
			if err := env.Client.Delete(context.Background(), stale.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			fresh := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: "kukopay"})

			// The cache still answers with the old object.
			cache := fixture.Intercept(env.Client, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if p, ok := obj.(*v1alpha1.Payment); ok && key == client.ObjectKeyFromObject(stale) {
						stale.DeepCopyInto(p)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			requests := &fixture.RequestLog{}
			r := &controllers.PaymentReconciler{
				Client: cache, APIReader: env.Client, Scheme: env.Scheme, Recorder: &fixture.EventLog{},
				Clock: clock.RealClock{}, Gateway: &gateway.Gateway{Reader: env.Client, HTTPClient: requests.Client()},
			}
			_, _ = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fresh)})
			if calls := requests.Calls(nil); len(calls) != 0 {
				t.Errorf("provider called for a replaced object: %+v", calls)
			}
			if got := fixture.GetPayment(t, env.Client, fresh); got.Status.CreateRequestedAt != nil || got.Status.Phase != "" {
				t.Errorf("the old object's decision was stored on the new one: %+v", got.Status)
			}
		})
	}
}

// TestAnUnstoredAnswerIsNotAskedForAgain is defect 13: while status writes
// fail (the API server is away), the manager used to query the provider
// again on every retry. The answer is kept and stored once writes work,
// after an exponential per-payment backoff, without another call.
func TestAnUnstoredAnswerIsNotAskedForAgain(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s := fixture.StartSim(t, paysim.Options{})
	var blocked atomic.Bool
	blocked.Store(true)
	refused := fixture.FailWrites(func(w fixture.Write) bool {
		_, ok := w.Object.(*v1alpha1.Payment)
		return ok && w.Status() && blocked.Load()
	}, nil)
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = refused.Wrap
	fixture.StartManager(t, env, ns, o)
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Quiet: true})
	p := fixture.TrackedPayment(t, env.Client, s, prov, "tracked", paysim.OutcomeProcessing)
	id := p.Spec.ProviderPaymentID

	fixture.Eventually(t, 20*time.Second, "several failed writes of the answer", func() bool { return refused.Failed() >= 5 })
	if q := s.Counters().QueriesByPayment[id]; q != 1 {
		t.Fatalf("%d status queries while the answer could not be stored, want 1", q)
	}
	blocked.Store(false)
	fixture.Eventually(t, 30*time.Second, "the kept answer to be stored", func() bool {
		got := fixture.GetPayment(t, env.Client, p)
		return got.Status.ProviderStatus == "processing" && got.Status.Query.LastTime != nil && got.Status.Query.Attempts == 1
	})
	if q := s.Counters().QueriesByPayment[id]; q != 1 {
		t.Errorf("%d status queries, want the one whose answer was stored", q)
	}
}

// TestRefusedConfigurationIsNotAVerdict is defect 6: a bad key (401) used to
// fail every payment created meanwhile. Now the payment keeps its phase, the
// PaymentProvider shows Ready=False with the reason and an Event, and once
// the key is fixed the same payment is created.
func TestRefusedConfigurationIsNotAVerdict(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s := fixture.StartSim(t, paysim.Options{KukoPayAPIKey: "sk_live"})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerProvider))
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Quiet: true}) // its Secret holds sk_test
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "during-rotation", Provider: "kukopay"})

	fixture.Eventually(t, 20*time.Second, "the provider to report the refused configuration", func() bool {
		c := meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controllers.ReasonProviderRejectedConfig
	})
	// The Event follows the condition's write.
	m.Events.Wait(t, corev1.EventTypeWarning, controllers.ReasonProviderRejectedConfig)
	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhasePending || got.Status.Failure != nil || meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview) != nil {
		t.Fatalf("a refused key settled the payment: %+v", got.Status)
	}
	if !strings.Contains(got.Status.Query.LastError, "401") {
		t.Errorf("lastError %q, want the 401", got.Status.Query.LastError)
	}

	fixture.UpdateSecret(t, env.Client, ns, prov.Spec.CredentialsSecretRef.Name, map[string]string{"apiKey": "sk_live"})
	fixture.Eventually(t, 20*time.Second, "the fixed key to create the payment", func() bool {
		return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID != ""
	})
	fixture.Eventually(t, 10*time.Second, "the provider to be Ready again", func() bool {
		c := meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if creates := s.Counters().PaymentsCreated; creates != 1 {
		t.Errorf("%d payments created at the provider, want 1", creates)
	}
}

// TestSharedMerchantReferenceCreatesOnce is defect 12: two Payments of one
// provider in one namespace with the same merchantReference. The reference
// cannot be checked at admission (it spans objects), so the newer Payment is
// not created at the provider and waits in Unknown/DuplicatePayment.
func TestSharedMerchantReferenceCreatesOnce(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}})
	first := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "first", Provider: "kukopay", MerchantReference: "ORD-1001"})
	time.Sleep(1100 * time.Millisecond) // creation times have second precision
	second := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "second", Provider: "kukopay", MerchantReference: "ORD-1001"})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	// The first is created at the provider (its answer stored), the second parked.
	fixture.Eventually(t, 10*time.Second, "the first payment's provider id", func() bool {
		return fixture.GetPayment(t, env.Client, first).Status.ProviderPaymentID != ""
	})
	got := fixture.WaitPhase(t, env.Client, second, v1alpha1.PhaseUnknown, 10*time.Second)
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview)
	if c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment || !strings.Contains(c.Message, "first") {
		t.Fatalf("review %+v, want DuplicatePayment naming the first Payment", c)
	}
	if got.Status.CreateRequestedAt != nil || got.Status.ProviderPaymentID != "" {
		t.Errorf("the second Payment was marked for create: %+v", got.Status)
	}
	if n := len(m.Requests.Calls(fixture.IsPost)); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	m.Events.Wait(t, corev1.EventTypeWarning, v1alpha1.ReasonDuplicatePayment)
}

// TestSharedIdempotencyKeyCreatesOnce: two Payments of one provider in one
// namespace set the same spec.idempotencyKey (different orders). The key
// cannot be checked at admission (it spans objects), so the newer Payment is
// not created at the provider, which would answer it with the first one's
// payment, and waits in Unknown/DuplicatePayment naming the first.
func TestSharedIdempotencyKeyCreatesOnce(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}})
	first := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "first", Provider: "kukopay", MerchantReference: "ORD-1001", IdempotencyKey: "checkout-7"})
	time.Sleep(1100 * time.Millisecond) // creation times have second precision
	second := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "second", Provider: "kukopay", MerchantReference: "ORD-1002", IdempotencyKey: "checkout-7"})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	fixture.Eventually(t, 10*time.Second, "the first payment's provider id", func() bool {
		return fixture.GetPayment(t, env.Client, first).Status.ProviderPaymentID != ""
	})
	got := fixture.WaitPhase(t, env.Client, second, v1alpha1.PhaseUnknown, 10*time.Second)
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview)
	if c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment || !strings.Contains(c.Message, "Payment first") || !strings.Contains(c.Message, "checkout-7") {
		t.Fatalf("review %+v, want DuplicatePayment naming the key and the first Payment", c)
	}
	if got.Status.CreateRequestedAt != nil || got.Status.ProviderPaymentID != "" {
		t.Errorf("the second Payment was marked for create: %+v", got.Status)
	}
	if n := len(m.Requests.Calls(fixture.IsPost)); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Errorf("%d payments created at the provider, want 1", n)
	}
	m.Events.Wait(t, corev1.EventTypeWarning, v1alpha1.ReasonDuplicatePayment)
}
