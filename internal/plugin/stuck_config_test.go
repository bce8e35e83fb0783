package plugin_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/plugin"
	"github.com/paywarden/paywarden/internal/provider"
)

// stuckAuthorized is a Manual-capture payment the provider authorized,
// driven by the pure core.
func stuckAuthorized(t *testing.T, t0 time.Time) (*v1alpha1.Payment, payment.Policy) {
	t.Helper()
	pol := payment.PolicyFor(&v1alpha1.PaymentProviderSpec{})
	pol.JitterPercent = 0
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "held", UID: types.UID("uid-held"), CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:   v1alpha1.LocalObjectReference{Name: "kukopay"},
			Amount:        v1alpha1.Amount{Value: 4500, Currency: "USD"},
			CaptureMethod: v1alpha1.CaptureManual,
		},
	}
	apply := func(out payment.Outcome) { cp := p.DeepCopy(); cp.Status = out.Status; p = cp }
	apply(payment.Plan(p, pol, payment.Facts{}, t0).Outcome)
	apply(payment.AfterCreate(p, pol, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusAuthorized, Amount: 4500, Currency: "USD"}}, t0))
	if p.Status.Phase != v1alpha1.PhaseAuthorized {
		t.Fatalf("fixture: phase %s", p.Status.Phase)
	}
	return p, pol
}

// A PaymentProvider whose credentials the provider refuses (401/403) is
// something a human must fix: docs/operations.md says `stuck` exits 1 "when
// any payment needs a human: a review, or a PaymentProvider to fix". The
// operator's capture refused for the configuration is kept (lastErrorClass
// ProviderConfig) and retried on the configuration backoff; filed under
// "Provider call in progress" (not a human's) before the configuration was
// looked at, the CronJob `stuck -A --older-than 30m` exited 0 while the
// merchant's capture could not go out and the authorization ran toward its
// expiry. The configuration comes first.
func TestStuckShowsACaptureBlockedByTheProviderConfigAsNeedingAHuman(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	p, pol := stuckAuthorized(t, t0)
	apply := func(out payment.Outcome) { cp := p.DeepCopy(); cp.Status = out.Status; p = cp }

	// The operator: kubectl paywarden capture held.
	p.Annotations = map[string]string{v1alpha1.AnnotationCapture: payment.CaptureAll}
	now := t0.Add(time.Minute)
	apply(payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCapture {
		t.Fatalf("step %s (%s), want the capture call", s.Action, s.Why)
	}
	// The provider refuses paywarden's credentials.
	unauthorized := &provider.Error{Provider: "shop/kukopay", Op: "capture", Class: provider.ErrProviderConfig, StatusCode: 401}
	apply(payment.AfterOperation(p, pol, v1alpha1.OperationCapture, payment.Call{Err: unauthorized}, now))
	if p.Status.Operation == nil || p.Status.Query.LastErrorClass != "ProviderConfig" {
		t.Fatalf("fixture: operation %+v, lastErrorClass %q", p.Status.Operation, p.Status.Query.LastErrorClass)
	}

	r := plugin.Stuck([]v1alpha1.Payment{*p}, now.Add(2*time.Hour), 30*time.Minute)
	var wait plugin.Wait
	if len(r.Groups) == 1 {
		wait = r.Groups[0].Wait
	}
	if r.NeedsHuman != 1 {
		t.Errorf("a capture that cannot go out because the provider refuses paywarden's credentials: group %q, needsHuman %d; "+
			"want it counted for a human (ProviderConfig), so `stuck` exits 1", wait, r.NeedsHuman)
	}
}

// The same for an Authorized Manual payment whose status queries are
// refused for the configuration: classify files it under "Waiting for a
// capture" (checked before ProviderConfig) with NeedsHuman false, so a
// broken PaymentProvider whose only open payments are authorizations is
// never reported by stuck's exit status.
func TestStuckShowsAnAuthorizationWhoseProviderRefusesTheConfigAsNeedingAHuman(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	p, pol := stuckAuthorized(t, t0)
	apply := func(out payment.Outcome) { cp := p.DeepCopy(); cp.Status = out.Status; p = cp }
	forbidden := &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrProviderConfig, StatusCode: 403}
	now := t0.Add(10 * time.Minute)
	apply(payment.AfterQuery(p, pol, payment.Call{Err: forbidden}, false, now))
	if p.Status.Query.LastErrorClass != "ProviderConfig" || p.Status.Phase != v1alpha1.PhaseAuthorized {
		t.Fatalf("fixture: phase %s lastErrorClass %q", p.Status.Phase, p.Status.Query.LastErrorClass)
	}
	r := plugin.Stuck([]v1alpha1.Payment{*p}, now.Add(time.Hour), 0)
	var wait plugin.Wait
	if len(r.Groups) == 1 {
		wait = r.Groups[0].Wait
	}
	if r.NeedsHuman != 1 {
		t.Errorf("an authorization whose provider refuses paywarden's configuration: group %q, needsHuman %d; want ProviderConfig, counted for a human", wait, r.NeedsHuman)
	}
}
