package paymentcache

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

func settled() *v1alpha1.Payment {
	at := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "p", UID: types.UID("uid-p"), ResourceVersion: "42", Generation: 3,
			Annotations:   map[string]string{"team": "x", "kubectl.kubernetes.io/last-applied-configuration": "{big}"},
			Finalizers:    []string{v1alpha1.FinalizerMoneyInFlight},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "paywarden", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kuko"}, MerchantReference: "order-1", IdempotencyKey: "key-1",
			Description: "the whole object", Amount: v1alpha1.Amount{Value: 500, Currency: "USD"},
		},
		Status: v1alpha1.PaymentStatus{
			Phase: v1alpha1.PhaseSucceeded, ProviderPaymentID: "pay_p", Closed: true,
			History:        []v1alpha1.HistoryEntry{{To: v1alpha1.PhasePending}, {Time: at, To: v1alpha1.PhaseSucceeded}},
			Conditions:     []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "long text"}},
			AmountReceived: &v1alpha1.Money{Value: 500, Currency: "USD"},
		},
	}
}

// decoded is p as the thin cache keeps it: decoded from the API server's
// JSON and judged for c's options.
func decoded(t *testing.T, c *Cache, p *v1alpha1.Payment) *Entry {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if e.whole == nil {
		t.Fatal("decoded entry has no payment to judge")
	}
	o, err := c.judge(&e)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*Entry)
}

func testCache() *Cache {
	byRef := func(o client.Object) []string { return []string{o.(*v1alpha1.Payment).Spec.MerchantReference} }
	byID := func(o client.Object) []string { return []string{payment.ProviderID(o.(*v1alpha1.Payment)), "shared"} }
	return &Cache{
		names:   []string{"byID", "byRef"},
		indexes: map[string]client.IndexerFunc{"byRef": byRef, "byID": byID},
		wake:    func(p *v1alpha1.Payment) bool { return p.Annotations["team"] == "x" },
	}
}

// An entry keeps the payment's identity and the answers about it, judged on
// the whole payment, and lets the payment go.
func TestAnEntryKeepsTheAnswersNotThePayment(t *testing.T) {
	p := settled()
	e := decoded(t, testCache(), p)
	switch {
	case e.whole != nil:
		t.Error("the judged entry still holds the decoded payment")
	case e.GetNamespace() != "shop" || e.GetName() != "p" || e.GetUID() != "uid-p" || e.GetResourceVersion() != "42":
		t.Errorf("identity = %s/%s %s %s", e.GetNamespace(), e.GetName(), e.GetUID(), e.GetResourceVersion())
	case e.Provider() != "kuko" || e.Phase() != v1alpha1.PhaseSucceeded || !e.Closed() || e.Deleting():
		t.Errorf("provider %q phase %q closed %v deleting %v", e.Provider(), e.Phase(), e.Closed(), e.Deleting())
	case !e.Wake():
		t.Error("Wake was not judged on the payment")
	case !e.RetentionSince().Equal(payment.RetentionSince(p)) || e.RetentionHeld():
		t.Errorf("retention since %s held %v, want %s and not held", e.RetentionSince(), e.RetentionHeld(), payment.RetentionSince(p))
	case e.News() != News(p):
		t.Error("News differs from the payment's")
	case !e.has(1, "order-1") || !e.has(0, "pay_p") || !e.has(0, "shared") || e.has(0, "order-1") || e.has(1, "pay_p"):
		t.Errorf("index keys wrong: %v", e.keys)
	}
	c := testCache()
	if !c.Has(e, "byRef", "order-1") || c.Has(e, "byID", "order-1") || c.Has(e, "byNothing", "order-1") {
		t.Error("Has does not answer by index name")
	}
	if again, _ := testCache().judge(e); again.(*Entry) != e || len(e.keys) != 3 {
		t.Errorf("judging twice changed the entry: %v", e.keys)
	}
	// What it reads back as: identity, provider, phase, closed; nothing that
	// moves money.
	back := e.payment()
	if back.Spec.Description != "" || back.Spec.Amount.Value != 0 || back.Status.AmountReceived != nil || back.Name != "p" || !back.Status.Closed {
		t.Errorf("read back as %+v", back)
	}

	held := settled()
	held.Status.Conditions = append(held.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: "Conflict"})
	now := metav1.Now()
	held.DeletionTimestamp = &now
	if e := decoded(t, testCache(), held); !e.RetentionHeld() || !e.Deleting() {
		t.Errorf("a payment under review, being deleted: held %v deleting %v", e.RetentionHeld(), e.Deleting())
	}
	// The bookmark that ends a watch's initial events: the reflector waits
	// for its mark, the one annotation an entry keeps.
	mark := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	if e := decoded(t, testCache(), mark); e.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" || e.GetResourceVersion() != "7" {
		t.Errorf("the initial events' bookmark reads back as %v at %s", e.GetAnnotations(), e.GetResourceVersion())
	}
	if e.GetAnnotations() != nil {
		t.Errorf("a payment's annotations read back as %v, want none", e.GetAnnotations())
	}
	if e := decoded(t, &Cache{}, p); e.Wake() || len(e.keys) != 0 {
		t.Errorf("a cache without options judged wake %v, keys %v", e.Wake(), e.keys)
	}
}

// News changes with everything that is news to the reconciler and with
// nothing else.
func TestNewsChangesWithWhatIsNews(t *testing.T) {
	base := News(settled())
	seen := metav1.Now()
	for name, change := range map[string]func(p *v1alpha1.Payment){
		"spec (generation)":       func(p *v1alpha1.Payment) { p.Generation++ },
		"an annotation added":     func(p *v1alpha1.Payment) { p.Annotations[v1alpha1.AnnotationRequery] = "1" },
		"an annotation changed":   func(p *v1alpha1.Payment) { p.Annotations["team"] = "y" },
		"an annotation removed":   func(p *v1alpha1.Payment) { delete(p.Annotations, "team") },
		"phase":                   func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhaseRefunded },
		"provider id":             func(p *v1alpha1.Payment) { p.Status.ProviderPaymentID = "pay_q" },
		"a refund's failure seen": func(p *v1alpha1.Payment) { p.Status.RefundFailureSeenAt = &seen },
	} {
		p := settled()
		change(p)
		if News(p) == base {
			t.Errorf("%s: News unchanged", name)
		}
	}
	a, b := settled(), settled()
	a.Annotations, b.Annotations = map[string]string{"ab": "c"}, map[string]string{"a": "bc"}
	if News(a) == News(b) {
		t.Error("News does not tell an annotation's key from its value")
	}
	a.Annotations, b.Annotations = map[string]string{"a": "b\x00\x01\x00\x00\x00\x00\x00\x00\x00c"}, map[string]string{"a": "b", "\x00": "c"}
	if News(a) == News(b) {
		t.Error("News does not tell one annotation from two")
	}
	p := settled()
	p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"metadata":{"labels":{"team":"y"}}}`
	p.Labels = map[string]string{"team": "y"}
	p.ResourceVersion, p.Status.Conditions, p.Status.AmountReceived = "43", nil, nil
	p.Status.History = append(p.Status.History, v1alpha1.HistoryEntry{To: v1alpha1.PhaseSucceeded})
	if News(p) != base {
		t.Error("News changed with no news (labels and kubectl's copy of the manifest, version, conditions, amount, history)")
	}
}

// An entry reads back the UID it was given, whether kept in 16 bytes (a
// UUID as the API server writes it) or as given.
func TestAnEntryKeepsItsUID(t *testing.T) {
	for _, uid := range []types.UID{
		"6f1c2a9e-0b7d-4c11-9a3e-0123456789ab", "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001",
		"6F1C2A9E-0B7D-4C11-9A3E-0123456789AB", "6f1c2a9e+0b7d-4c11-9a3e-0123456789ab", "6f1c2a9e-0b7d-4c11-9a3e-0123456789a",
		"6f1c2a9e-0b7d-4c11-9a3e-0123456789ag", "uid-p", "",
	} {
		var e Entry
		e.SetUID(uid)
		if got := e.GetUID(); got != uid {
			t.Errorf("UID %q read back as %q", uid, got)
		}
		if got := e.payment().UID; got != uid {
			t.Errorf("UID %q read back from the payment as %q", uid, got)
		}
	}
	if c := compact("6f1c2a9e-0b7d-4c11-9a3e-0123456789ab"); c.other != "" {
		t.Errorf("a UUID is kept as the string %q, not in 16 bytes", c.other)
	}
}
