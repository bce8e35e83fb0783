package webhookreceiver

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// remoteAdapter stands for an adapter that verifies through its provider's
// API: the request key and the time it was sent come from two headers, and
// every VerifyWebhook is one call to the provider.
type remoteAdapter struct {
	provider.Provider // nil: only the methods below are called
	verdict           error
	calls             int
}

func (a *remoteAdapter) VerificationKey(h http.Header, _ []byte) (string, time.Time, error) {
	at, err := time.Parse(time.RFC3339, h.Get("Sent-At"))
	if err != nil {
		return "", time.Time{}, provider.SignatureError(provider.ErrMalformedHeader, "Sent-At")
	}
	return h.Get("Request-Key"), at, nil
}

func (a *remoteAdapter) VerifyWebhook(context.Context, http.Header, []byte, [][]byte, time.Duration, time.Time) (string, error) {
	a.calls++
	return "remote", a.verdict
}

// The receiver asks the provider once per provider and VerificationKey while
// the request is within the tolerance, whatever the verdict was; a transient
// failure is asked again.
func TestAPIVerificationRemembersOneVerdictPerProviderAndRequest(t *testing.T) {
	sent := time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	const tolerance = 5 * time.Minute
	prov := func(ns, name string) *v1alpha1.PaymentProvider {
		return &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	shopA, shopB := prov("shop-a", "pp"), prov("shop-b", "pp")
	request := func(key string) http.Header {
		return http.Header{"Request-Key": {key}, "Sent-At": {sent.Format(time.RFC3339)}}
	}
	type step struct {
		prov      *v1alpha1.PaymentProvider
		key       string
		at        time.Duration // after sent
		wantCalls int           // calls to the provider so far
	}
	for _, tc := range []struct {
		name    string
		verdict error
		steps   []step
	}{
		{"a valid request's redelivery costs no call", nil, []step{
			{shopA, "tx-1", 0, 1},
			{shopA, "tx-1", time.Minute, 1},
		}},
		{"an invalid request's copies cost no call", provider.SignatureError(provider.ErrNoMatchingSignature, ""), []step{
			{shopA, "tx-1", 0, 1},
			{shopA, "tx-1", time.Second, 1},
		}},
		{"another request key is asked", nil, []step{
			{shopA, "tx-1", 0, 1},
			{shopA, "tx-2", 0, 2},
			{shopA, "tx-1", 0, 2},
		}},
		{"the same request key at another provider is asked", nil, []step{
			{shopA, "tx-1", 0, 1},
			{shopB, "tx-1", 0, 2},
		}},
		{"a transient failure is asked again", errors.New("paypal unreachable"), []step{
			{shopA, "tx-1", 0, 1},
			{shopA, "tx-1", 0, 2},
		}},
		{"outside the tolerance the adapter decides, without the remembered verdict", nil, []step{
			{shopA, "tx-1", 0, 1},
			{shopA, "tx-1", tolerance + time.Second, 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(sent)
			v := newAPIVerification(100, 100, 10, clk)
			a := &remoteAdapter{verdict: tc.verdict}
			for i, s := range tc.steps {
				clk.SetTime(sent.Add(s.at))
				_, err := v.do(context.Background(), a, a, s.prov, request(s.key), nil, nil, tolerance, clk.Now())
				if !errors.Is(err, tc.verdict) {
					t.Fatalf("step %d: err %v, want %v", i+1, err, tc.verdict)
				}
				if a.calls != s.wantCalls {
					t.Fatalf("step %d (%s %s at +%s): %d calls to the provider, want %d", i+1, s.prov.Namespace, s.key, s.at, a.calls, s.wantCalls)
				}
			}
		})
	}
}

// Requests the adapter rejects without a call (outside the tolerance, or
// without a readable key) never take a token from the provider's bucket, so a
// flood of them cannot keep a genuine request from being verified; requests
// that need a call do, and one past the burst is errVerifyBudget.
func TestAPIVerificationBudgetIsSpentOnCallsOnly(t *testing.T) {
	sent := time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	const tolerance = 5 * time.Minute
	shop := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pp"}}
	clk := clocktesting.NewFakePassiveClock(sent.Add(time.Minute))
	v := newAPIVerification(0.001, 1, 10, clk)
	a := &remoteAdapter{}
	ask := func(h http.Header) error {
		_, err := v.do(context.Background(), a, a, shop, h, nil, nil, tolerance, clk.Now())
		return err
	}
	stale := http.Header{"Request-Key": {"tx-old"}, "Sent-At": {sent.Add(-time.Hour).Format(time.RFC3339)}}
	unreadable := http.Header{"Request-Key": {"tx-bad"}, "Sent-At": {"yesterday"}}
	for range 3 {
		if err := ask(stale); errors.Is(err, errVerifyBudget) {
			t.Fatal("a request outside the tolerance took the budget")
		}
		if err := ask(unreadable); errors.Is(err, errVerifyBudget) {
			t.Fatal("a request without a readable key took the budget")
		}
	}
	calls := a.calls
	if err := ask(http.Header{"Request-Key": {"tx-1"}, "Sent-At": {sent.Format(time.RFC3339)}}); err != nil || a.calls != calls+1 {
		t.Fatalf("genuine request: %v, %d calls", err, a.calls-calls)
	}
	if err := ask(http.Header{"Request-Key": {"tx-2"}, "Sent-At": {sent.Format(time.RFC3339)}}); !errors.Is(err, errVerifyBudget) {
		t.Fatalf("a call past the burst: %v, want errVerifyBudget", err)
	}
}
