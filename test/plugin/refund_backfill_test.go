package plugin_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// wantNothingWritten checks that the command was refused with a message
// saying says (or failed with says, when refused is false) and that obj's
// annotations are as they were.
func wantNothingWritten(t *testing.T, r result, refused bool, says string, obj client.Object) {
	t.Helper()
	if r.code != 1 || !strings.Contains(r.stderr, says) || r.stdout != "" || refused != strings.Contains(r.stderr, "refused, nothing written") {
		t.Errorf("want a failure saying %q (a refusal: %v); got %s", says, refused, r)
	}
	got := obj.DeepCopyObject().(client.Object)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.GetAnnotations(), obj.GetAnnotations()) {
		t.Errorf("annotations of %s changed by a refused command: %v, were %v", obj.GetName(), got.GetAnnotations(), obj.GetAnnotations())
	}
}

func getRefund(t *testing.T, ns, name string) *v1alpha1.Refund {
	t.Helper()
	rf := &v1alpha1.Refund{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

// TestRefundActions: requery and resolve of a Refund (refund/NAME) against
// a manager and paysim whose refunds stay pending until the test settles
// them, so each Refund ends Unknown (RetriesExhausted) as in
// docs/runbook-refund-unknown.md; each command is checked by what the
// manager did, and by what is refused before anything is written.
func TestRefundActions(t *testing.T) {
	ctx := context.Background()
	s := fixture.StartSim(t, paysim.Options{})
	ns := fixture.Namespace(t, env.Client, "refunds")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: []string{"200ms", "200ms", "200ms", "200ms"}})
	fixture.StartManager(t, env, ns, fixture.ManagerOptions{
		Options:          controllers.Options{Controllers: []controllers.Controller{controllers.ControllerPayment, controllers.ControllerRefund}},
		KubernetesEvents: true,
	})
	// A paid payment whose refunds the provider leaves pending, and a
	// Refund of it that ends Unknown.
	stuckRefund := func(name string) (*v1alpha1.Payment, *v1alpha1.Refund) {
		p := &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: prov.Name}, Amount: v1alpha1.Amount{Value: 4500, Currency: "USD"},
				Metadata: map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed), paysim.MetaAfter: "0s", paysim.MetaRefund: string(paysim.OutcomePending)}},
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
		rf := &v1alpha1.Refund{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-1"},
			Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: name}, Reason: "returned"},
		}
		if err := env.Client.Create(ctx, rf); err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, fixture.Timeout, "refund "+rf.Name+" Unknown, RetriesExhausted", func() bool {
			got := getRefund(t, ns, rf.Name)
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview)
			return got.Status.Phase == v1alpha1.RefundUnknown && c != nil && c.Reason == v1alpha1.ReasonRetriesExhausted
		})
		return p, getRefund(t, ns, rf.Name)
	}
	returned, returnedRefund := stuckRefund("returned")
	_, lostRefund := stuckRefund("lost")

	t.Run("completion", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"__complete", "paywarden", "resolve", "-n", ns, "refund/"}, "refund/lost-1\nrefund/returned-1\n:4\n"},
			{[]string{"__complete", "paywarden", "requery", "-n", ns, "rf/r"}, "rf/returned-1\n:4\n"},
			{[]string{"__complete", "paywarden", "resolve", "-n", ns, "refund/lost-1", "--phase", ""}, "Succeeded\nFailed\n:4\n"},
		} {
			if r := kubectl(tt.args...); r.code != 0 || r.stdout != tt.want {
				t.Errorf("kubectl %s: %s\nwant stdout %q", strings.Join(tt.args, " "), r, tt.want)
			}
		}
	})

	t.Run("refusals write nothing", func(t *testing.T) {
		wantNothingWritten(t, kubectl("paywarden", "resolve", "refund/lost-1", "-n", ns, "--phase", "Expired", "--reason", "x"), true,
			`--phase "Expired": a refund is resolved to Succeeded or Failed`, lostRefund)
		wantNothingWritten(t, kubectl("paywarden", "resolve", "refunds/lost-1", "-n", ns, "--phase", "Failed", "--reason", " "), true, "--reason is required", lostRefund)
		wantNothingWritten(t, kubectl("paywarden", "resolve", "deployment/lost-1", "-n", ns, "--phase", "Failed", "--reason", "x"), false,
			`error: resolve takes a payment or a refund: NAME (a payment), payment/NAME or refund/NAME, not "deployment/lost-1"`, lostRefund)
		if r := kubectl("paywarden", "requery", "refund/nope", "-n", ns); r.code != 1 || r.stderr != fmt.Sprintf("error: refund nope not found in namespace %s\n", ns) {
			t.Error(r)
		}
	})

	t.Run("requery an Unknown refund the provider settled meanwhile, then resolve it", func(t *testing.T) {
		if err := s.SettleRefund(paysim.KukoPay, returnedRefund.Status.ProviderRefundID, paysim.OutcomeSucceed); err != nil {
			t.Fatal(err)
		}
		r := kubectl("paywarden", "requery", "refund/returned-1", "-n", ns, "--timeout", "30s")
		head := fmt.Sprintf("refund %s/returned-1: status query now, and the query schedule restarted (annotation payments.paywarden.dev/requery=", ns)
		// The answer settles it; the review stays until a human resolves it.
		answer := regexp.MustCompile(`\nqueried at \S+: refund returned-1 is Succeeded \(provider status "succeeded"\); needs review: RetriesExhausted: [^\n]+\n$`)
		if r.code != 0 || !strings.HasPrefix(r.stdout, head) || !answer.MatchString(r.stdout) {
			t.Fatal(r)
		}
		got := getRefund(t, ns, "returned-1")
		if v := got.Annotations[v1alpha1.AnnotationRequery]; v == "" || got.Status.Actions.Requery != v || got.Status.Phase != v1alpha1.RefundSucceeded {
			t.Errorf("requery annotation %q acted on as %q; phase %s", v, got.Status.Actions.Requery, got.Status.Phase)
		}
		fixture.WaitPhase(t, env.Client, returned, v1alpha1.PhaseRefunded, fixture.Timeout)
		wantNothingWritten(t, kubectl("paywarden", "requery", "refund/returned-1", "-n", ns), true, "refund is already Succeeded; nothing to query", got)

		r = kubectl("paywarden", "resolve", "rf/returned-1", "-n", ns, "--phase", "Succeeded", "--reason", "refund seen in the dashboard, OPS-41", "--timeout", "30s")
		if r.code != 0 || !strings.HasSuffix(r.stdout, "\nresolved: refund returned-1 is Succeeded\n") {
			t.Fatal(r)
		}
		got = getRefund(t, ns, "returned-1")
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "OPS-41") {
			t.Errorf("NeedsReview %s", fixture.Dump(c))
		}
		// Settled and reviewed: what the manager would refuse is refused here.
		wantNothingWritten(t, kubectl("paywarden", "resolve", "refund/returned-1", "-n", ns, "--phase", "Failed", "--reason", "x"), true, "refund is already Succeeded and needs no review", got)
		// payment/NAME, like a bare name, is the payment.
		wantNothingWritten(t, kubectl("paywarden", "requery", "payment/returned", "-n", ns), true, "payment is already Refunded; nothing to query", get(t, returned))
	})

	t.Run("resolve an Unknown refund", func(t *testing.T) {
		r := kubectl("paywarden", "resolve", "refund/lost-1", "-n", ns, "--phase", "Failed", "--reason", "no refund in the dashboard, OPS-42", "--timeout", "30s")
		want := fmt.Sprintf("refund %s/lost-1: resolve to Failed: no refund in the dashboard, OPS-42 (annotation payments.paywarden.dev/resolve=\"Failed\" payments.paywarden.dev/resolve-reason=\"no refund in the dashboard, OPS-42\" written)\n"+
			"resolved: refund lost-1 is Failed\n", ns)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("%s\nwant stdout\n%s", r, want)
		}
		got := getRefund(t, ns, "lost-1")
		if h := got.Status.History[len(got.Status.History)-1]; got.Status.Phase != v1alpha1.RefundFailed || h.Source != v1alpha1.SourceManual || !strings.Contains(h.Reason, "no refund in the dashboard, OPS-42") ||
			meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionNeedsReview) {
			t.Errorf("phase %s, last history entry %+v, conditions %s", got.Status.Phase, h, fixture.Dump(got.Status.Conditions))
		}
		wantNothingWritten(t, kubectl("paywarden", "resolve", "refund/lost-1", "-n", ns, "--phase", "Failed", "--reason", "no refund in the dashboard, OPS-42"), true,
			"this resolve was already acted on", got)
	})

	if r := kubectl("__complete", "paywarden", "resolve", "-n", ns, "refund/"); r.code != 0 || r.stdout != ":4\n" {
		t.Errorf("completion of refunds to resolve, none left: %s", r)
	}
}

// TestBackfill: kubectl paywarden backfill against a manager running the
// events-API backfill and paysim, with no webhook receiver: a payment
// settled at the provider while its webhook was lost settles through the
// replay the command asks for. What the manager would mark done without a
// replay (a time in the future, not a time) is refused before anything is
// written.
func TestBackfill(t *testing.T) {
	s := fixture.StartSim(t, paysim.Options{})
	ns := fixture.Namespace(t, env.Client, "backfill")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Quiet: true})
	m := fixture.StartManager(t, env, ns, fixture.ManagerOptions{
		Options: controllers.Options{Controllers: []controllers.Controller{controllers.ControllerBackfill}}, KubernetesEvents: true,
	})
	lost := fixture.TrackedPayment(t, env.Client, s, prov, "webhook-lost", paysim.OutcomeSucceed)
	fixture.SimEvent(t, s, v1alpha1.ProviderKukoPay, lost.Spec.ProviderPaymentID)
	fixture.WaitCached(t, m.Client(), lost)

	t.Run("refusals write nothing", func(t *testing.T) {
		p := fixture.GetProvider(t, env.Client, ns, prov.Name)
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		wantNothingWritten(t, kubectl("paywarden", "backfill", "kukopay", "-n", ns, "--from", future), true, future+" is in the future", p)
		wantNothingWritten(t, kubectl("paywarden", "backfill", "kukopay", "-n", ns, "--from", "yesterday"), true, `--from: "yesterday" is neither an RFC 3339 time`, p)
		wantNothingWritten(t, kubectl("paywarden", "backfill", "kukopay", "-n", ns, "--from", "-2h"), true, "how far back must be positive", p)
		if r := kubectl("paywarden", "backfill", "nope", "-n", ns, "--from", "1h"); r.code != 1 || r.stderr != fmt.Sprintf("error: paymentprovider nope not found in namespace %s\n", ns) {
			t.Error(r)
		}
	})

	var from string
	t.Run("replay the events since 10m ago", func(t *testing.T) {
		r := kubectl("paywarden", "backfill", "kukopay", "-n", ns, "--from", "10m", "--timeout", "30s")
		got := fixture.GetProvider(t, env.Client, ns, prov.Name)
		from = got.Annotations[v1alpha1.AnnotationBackfillFrom]
		want := fmt.Sprintf("paymentprovider %s/kukopay: replay of the provider's events since %s (annotation payments.paywarden.dev/backfill-from=%q written)\n"+
			"replayed: read 1 event(s) since %s: 1 new, 0 already in the inbox; cursor (none)\n", ns, from, from, from)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("%s\nwant stdout\n%s", r, want)
		}
		if at, err := time.Parse(time.RFC3339, from); err != nil || time.Since(at) < 10*time.Minute || time.Since(at) > 11*time.Minute {
			t.Errorf("backfill-from %q, want 10m ago", from)
		}
		if done := got.Annotations[v1alpha1.AnnotationBackfillFromDone]; done != from {
			t.Errorf("backfill-from-done %q, want %q", done, from)
		}
		if p := get(t, lost); p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.LastEvent == nil || p.Status.LastEvent.Source != v1alpha1.SourceBackfill {
			t.Errorf("payment %s, last event %s", p.Status.Phase, fixture.Dump(p.Status.LastEvent))
		}
	})

	t.Run("the same time again runs again", func(t *testing.T) {
		r := kubectl("paywarden", "backfill", "kukopay", "-n", ns, "--from", from, "--timeout", "30s")
		want := fmt.Sprintf("paymentprovider %s/kukopay: replay of the provider's events since %s, again (annotation payments.paywarden.dev/backfill-from=%q written, payments.paywarden.dev/backfill-from-done removed)\n"+
			"replayed: read 1 event(s) since %s: 0 new, 1 already in the inbox; cursor (none)\n", ns, from, from, from)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("%s\nwant stdout\n%s", r, want)
		}
	})

	if r := kubectl("__complete", "paywarden", "backfill", "-n", ns, "k"); r.code != 0 || r.stdout != "kukopay\n:4\n" {
		t.Errorf("completion: %s", r)
	}
}
