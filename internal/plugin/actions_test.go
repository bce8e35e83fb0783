package plugin_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/plugin"
)

// consolePayment is one payment of the console fixture, to change freely.
func consolePayment(t *testing.T, namespace, name string) *v1alpha1.Payment {
	t.Helper()
	for _, p := range fixture.ConsoleFixture().Payments {
		if p.Namespace == namespace && p.Name == name {
			return p.DeepCopy()
		}
	}
	t.Fatalf("no payment %s/%s in the console fixture", namespace, name)
	return nil
}

// wantRefused checks that err refuses the action (nothing written) and
// says why.
func wantRefused(t *testing.T, err error, says string) {
	t.Helper()
	switch {
	case says == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case says == "":
	case !errors.Is(err, plugin.ErrRefused) || !strings.Contains(err.Error(), says):
		t.Fatalf("error %v, want a refusal saying %q", err, says)
	}
}

func TestPlanCaptureRefusesWhatTheManagerWould(t *testing.T) {
	now := fixture.ConsoleNow
	for _, tt := range []struct {
		name, payment, amount, acted string
		value, note, refused         string
	}{
		{name: "part of the authorization", payment: "manual-capture", amount: "30.00", value: "3000"},
		{name: "all of it", payment: "manual-capture", value: "all"},
		{name: "the whole authorization in major units", payment: "manual-capture", amount: "45", value: "4500"},
		{name: "above the authorization", payment: "manual-capture", amount: "45.01", refused: "from 1 to the authorized 45.00 USD (4500)"},
		{name: "too many decimals", payment: "manual-capture", amount: "30.001", refused: `"30.001" has 3 decimals, but USD has 2`},
		{name: "a decimal comma", payment: "manual-capture", amount: "30,00", refused: "is not an amount in USD major units"},
		{name: "zero", payment: "manual-capture", amount: "0.00", refused: "is zero"},
		{name: "a payment captured automatically", payment: "processing", refused: "captureMethod is Automatic"},
		{name: "a settled payment", payment: "voided", refused: "already Canceled; nothing to capture"},
		{name: "all, after all was refused", payment: "manual-capture", acted: "all", value: "4500"},
		{name: "the same part again", payment: "manual-capture", amount: "30.00", acted: "3000", value: "03000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := consolePayment(t, "shop", tt.payment)
			p.Status.Actions.Capture = tt.acted
			req, err := plugin.PlanCapture(p, tt.amount, now)
			wantRefused(t, err, tt.refused)
			if tt.refused == "" && (req.Value != tt.value || req.Set[v1alpha1.AnnotationCapture] != tt.value || req.Note != "") {
				t.Errorf("request %+v, want capture=%s at once", req, tt.value)
			}
		})
	}
	t.Run("before the authorization, it waits", func(t *testing.T) {
		p := consolePayment(t, "shop", "manual-capture")
		p.Status.Phase = v1alpha1.PhaseProcessing
		req, err := plugin.PlanCapture(p, "30.00", now)
		if err != nil || req.Note != "the payment is Processing: the capture waits until it is Authorized" {
			t.Errorf("request %+v, %v", req, err)
		}
	})
	t.Run("behind another operator action", func(t *testing.T) {
		p := consolePayment(t, "shop", "manual-capture")
		p.Annotations = map[string]string{v1alpha1.AnnotationRequery: "now"}
		_, err := plugin.PlanCapture(p, "30.00", now)
		wantRefused(t, err, "an earlier operator action (operator requery) is still waiting")
	})
}

func TestPlanCancelResolveRequery(t *testing.T) {
	now := fixture.ConsoleNow
	type plan func(p *v1alpha1.Payment) (plugin.Request, error)
	cancel := func(reason string) plan {
		return func(p *v1alpha1.Payment) (plugin.Request, error) { return plugin.PlanCancel(p, reason, now) }
	}
	resolve := func(to, reason string) plan {
		return func(p *v1alpha1.Payment) (plugin.Request, error) { return plugin.PlanResolve(p, to, reason, now) }
	}
	requery := func(p *v1alpha1.Payment) (plugin.Request, error) { return plugin.PlanRequery(p, now) }
	for _, tt := range []struct {
		name, namespace, payment string
		plan                     plan
		refused                  string
	}{
		{"cancel an authorization", "shop", "manual-capture", cancel("out of stock"), ""},
		{"cancel a paid payment", "shop", "paid", cancel("oops"), "it took the payer's money, so it cannot be canceled; create a Refund"},
		{"cancel without a reason", "shop", "manual-capture", cancel(" "), "--reason is required"},
		{"cancel again with the reason acted on", "shop", "voided", cancel("out of stock"), "give another --reason"},
		{"requery a payment in flight", "shop", "processing", requery, ""},
		{"requery an Unknown payment", "billing", "retries-exhausted", requery, ""},
		{"requery a settled payment", "shop", "declined", requery, "already Failed; nothing to query"},
		{"resolve a payment under review", "billing", "amount-mismatch", resolve("Succeeded", "the rest came by bank transfer"), ""},
		{"resolve a settled payment", "shop", "paid", resolve("Failed", "why not"), "already Succeeded and needs no review"},
		{"resolve to a phase no operator sets", "billing", "amount-mismatch", resolve("Pending", "x"), `--phase "Pending": give one of Succeeded, Failed, Expired, Canceled`},
		{"resolve without a reason", "billing", "amount-mismatch", resolve("Failed", ""), "--reason is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.plan(consolePayment(t, tt.namespace, tt.payment))
			wantRefused(t, err, tt.refused)
			if tt.refused == "" && len(req.Set) == 0 {
				t.Errorf("request %+v writes nothing", req)
			}
		})
	}
}

func TestPlanRefundRefusesWhatTheAllowanceWould(t *testing.T) {
	f := fixture.ConsoleFixture()
	now := fixture.ConsoleNow
	siblings := f.Refunds // partly-refunded: 15.00 refunded, 10.00 in flight, of 60.00
	for _, tt := range []struct {
		name, payment, amount string
		all                   bool
		want                  int64 // spec.amount; 0: everything refundable
		describe, note        string
		refused               string
	}{
		{name: "within what is refundable", payment: "partly-refunded", amount: "35.00", want: 3500, describe: "refund of 35.00 USD"},
		{name: "everything still refundable", payment: "partly-refunded", all: true, describe: "refund of 35.00 USD"},
		{name: "above what is refundable", payment: "partly-refunded", amount: "35.01",
			refused: "OverRefund: 35.01 USD asked, but of the 60.00 USD received 25.00 USD is refunded or being refunded, leaving 35.00 USD"},
		{name: "too many decimals", payment: "partly-refunded", amount: "1.234", refused: `"1.234" has 3 decimals, but USD has 2`},
		{name: "yen have no decimals", payment: "refunded", amount: "10.5", refused: `"10.5" has decimals, but JPY has none`},
		{name: "neither --amount nor --all", payment: "partly-refunded", refused: "give either --amount (in USD major units) or --all"},
		{name: "a payment that never took money", payment: "declined", all: true, refused: "PaymentNotPaid: payment declined ended Failed without taking money"},
		{name: "a payment not paid yet", payment: "awaiting-payer", amount: "5.00", want: 500, describe: "refund of 5.00 USD",
			note: "the refund waits (PaymentNotSucceeded) before the manager decides it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := consolePayment(t, "shop", tt.payment)
			rf, describe, note, err := plugin.PlanRefund(p, siblings, tt.amount, tt.all, "returned", now)
			wantRefused(t, err, tt.refused)
			if tt.refused != "" {
				return
			}
			if rf.GenerateName != p.Name+"-" || rf.Name != "" || rf.Spec.PaymentRef.Name != p.Name || rf.Spec.Reason != "returned" {
				t.Errorf("refund %+v", rf.ObjectMeta)
			}
			if got := rf.Spec.Amount; tt.want == 0 && got != nil || tt.want != 0 && (got == nil || got.Value != tt.want || got.Currency != p.Spec.Amount.Currency) {
				t.Errorf("spec.amount %+v, want %d", got, tt.want)
			}
			if describe != tt.describe || note != tt.note {
				t.Errorf("describe %q note %q, want %q and %q", describe, note, tt.describe, tt.note)
			}
		})
	}
}

// TestCheckFollowsTheManager: an action is done when the manager acted on
// its value and the payment shows the outcome, or a refusal Event came.
func TestCheckFollowsTheManager(t *testing.T) {
	now := fixture.ConsoleNow
	p := consolePayment(t, "shop", "manual-capture")
	req, err := plugin.PlanCapture(p, "30.00", now)
	if err != nil {
		t.Fatal(err)
	}
	if pr := plugin.Check(p, req, nil); pr.Done || !strings.Contains(pr.Text, "has not acted on the capture yet") {
		t.Errorf("before the manager: %+v", pr)
	}
	p.Status.Actions.Capture = "3000"
	p.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCapture, RequestedAt: metav1.NewTime(now)}
	if pr := plugin.Check(p, req, nil); pr.Done || !strings.Contains(pr.Text, "capture call to the provider is in progress") {
		t.Errorf("during the call: %+v", pr)
	}
	p.Status.Operation = nil
	refusal := eventsv1.Event{Reason: "CaptureRefused", Note: "the provider refused the capture: 422", EventTime: metav1.NewMicroTime(now.Add(time.Second))}
	if e := plugin.Refusal("capture", []eventsv1.Event{refusal}, now); e == nil {
		t.Fatal("refusal Event not found")
	} else if pr := plugin.Check(p, req, e); !pr.Done || !pr.Failed || !strings.Contains(pr.Text, "422") {
		t.Errorf("refused: %+v", pr)
	}
	if e := plugin.Refusal("capture", []eventsv1.Event{refusal}, now.Add(time.Minute)); e != nil {
		t.Errorf("a refusal from before the write counts: %+v", e)
	}
	p.Status.Phase, p.Status.AmountDisplay = v1alpha1.PhaseSucceeded, "30.00 of 45.00 USD"
	if pr := plugin.Check(p, req, nil); !pr.Done || pr.Failed || pr.Text != "captured: payment manual-capture is Succeeded, 30.00 of 45.00 USD" {
		t.Errorf("captured: %+v", pr)
	}

	c := consolePayment(t, "shop", "awaiting-payer")
	creq, _ := plugin.PlanCancel(c, "changed their mind", now)
	c.Status.Actions.Cancel, c.Status.Phase = "changed their mind", v1alpha1.PhaseSucceeded
	if pr := plugin.Check(c, creq, nil); !pr.Done || !pr.Failed || !strings.Contains(pr.Text, "kubectl paywarden refund awaiting-payer -n shop --all") {
		t.Errorf("a cancel overtaken by the payment: %+v", pr)
	}

	q := consolePayment(t, "shop", "processing")
	qreq, _ := plugin.PlanRequery(q, now)
	q.Status.Actions.Requery = qreq.Value
	q.Status.History = append(q.Status.History, v1alpha1.HistoryEntry{Time: metav1.NewTime(now), From: q.Status.Phase, To: q.Status.Phase, Source: v1alpha1.SourceManual, Reason: "Requery: restart the status-query schedule"})
	if pr := plugin.Check(q, qreq, nil); pr.Done {
		t.Errorf("requery done before the query: %+v", pr)
	}
	last := metav1.NewMicroTime(now.Add(300 * time.Millisecond))
	q.Status.Query.LastTime, q.Status.Phase = &last, v1alpha1.PhaseSucceeded
	if pr := plugin.Check(q, qreq, nil); !pr.Done || pr.Failed || !strings.HasPrefix(pr.Text, "queried at 2026-03-01T10:00:00Z: payment processing is Succeeded") {
		t.Errorf("requery answered: %+v", pr)
	}
}

func TestCheckRefund(t *testing.T) {
	rf := fixture.ConsoleFixture().Refunds[0]
	if pr := plugin.CheckRefund(&rf); !pr.Done || pr.Failed || pr.Text != "refunded: refund partly-refunded-return is Succeeded, 15.00 USD (provider refund id kp_re_1)" {
		t.Errorf("succeeded: %+v", pr)
	}
	rf.Status.Phase, rf.Status.WaitingFor = v1alpha1.RefundPending, v1alpha1.ReasonEarlierRefundInFlight
	if pr := plugin.CheckRefund(&rf); pr.Done || pr.Text != "refund partly-refunded-return is Pending, waiting for EarlierRefundInFlight" {
		t.Errorf("pending: %+v", pr)
	}
	rf.Status.Phase, rf.Status.Failure = v1alpha1.RefundFailed, &v1alpha1.Failure{Code: "OverRefund", Message: "too much"}
	if pr := plugin.CheckRefund(&rf); !pr.Done || !pr.Failed || !strings.Contains(pr.Text, "OverRefund: too much") {
		t.Errorf("failed: %+v", pr)
	}
}

// consoleRefund is a Refund of the console fixture (partly-refunded-return:
// Succeeded; partly-refunded-goodwill: Processing), to change freely.
func consoleRefund(t *testing.T, name string) *v1alpha1.Refund {
	t.Helper()
	for _, rf := range fixture.ConsoleFixture().Refunds {
		if rf.Name == name {
			return rf.DeepCopy()
		}
	}
	t.Fatalf("no refund %s in the console fixture", name)
	return nil
}

// underReview puts rf in phase under review for reason, as the manager does.
func underReview(rf *v1alpha1.Refund, phase v1alpha1.RefundPhase, reason string) *v1alpha1.Refund {
	rf.Status.Phase = phase
	rf.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: reason, Message: "the provider's answer is lost",
		LastTransitionTime: metav1.NewTime(fixture.ConsoleNow.Add(-time.Minute))}}
	return rf
}

func TestPlanRefundResolveRequery(t *testing.T) {
	now := fixture.ConsoleNow
	type plan func(rf *v1alpha1.Refund) (plugin.Request, error)
	resolve := func(to, reason string) plan {
		return func(rf *v1alpha1.Refund) (plugin.Request, error) {
			return plugin.PlanRefundResolve(rf, to, reason, now)
		}
	}
	requery := func(rf *v1alpha1.Refund) (plugin.Request, error) { return plugin.PlanRefundRequery(rf, now) }
	unknown := func(t *testing.T) *v1alpha1.Refund {
		return underReview(consoleRefund(t, "partly-refunded-goodwill"), v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted)
	}
	settled := func(t *testing.T) *v1alpha1.Refund { return consoleRefund(t, "partly-refunded-return") }
	for _, tt := range []struct {
		name    string
		refund  func(t *testing.T) *v1alpha1.Refund
		plan    plan
		refused string
	}{
		{"resolve an Unknown refund under review", unknown, resolve("Succeeded", "re_123 seen in the dashboard"), ""},
		{"resolve a refund in flight", func(t *testing.T) *v1alpha1.Refund { return consoleRefund(t, "partly-refunded-goodwill") }, resolve("Failed", "never sent"), ""},
		{"resolve a settled refund under review", func(t *testing.T) *v1alpha1.Refund {
			return underReview(settled(t), v1alpha1.RefundSucceeded, v1alpha1.ReasonConflictingStatus)
		}, resolve("Failed", "the bank returned it"), ""},
		{"resolve a settled refund", settled, resolve("Failed", "why not"), "already Succeeded and needs no review"},
		{"resolve to a phase a refund has not", unknown, resolve("Expired", "x"), `--phase "Expired": a refund is resolved to Succeeded or Failed`},
		{"resolve to a payment's phase", unknown, resolve("Canceled", "x"), `a refund is resolved to Succeeded or Failed`},
		{"resolve without a reason", unknown, resolve("Failed", " "), "--reason is required"},
		{"resolve again as acted on", func(t *testing.T) *v1alpha1.Refund {
			rf := unknown(t)
			rf.Status.Actions.Resolve = "Failed: no refund in the dashboard"
			return rf
		}, resolve("Failed", "no refund in the dashboard"), "give another --reason"},
		{"requery a refund in flight", func(t *testing.T) *v1alpha1.Refund { return consoleRefund(t, "partly-refunded-goodwill") }, requery, ""},
		{"requery an Unknown refund", unknown, requery, ""},
		{"requery a settled refund", settled, requery, "refund is already Succeeded; nothing to query"},
		{"requery behind a resolve not acted on", func(t *testing.T) *v1alpha1.Refund {
			rf := unknown(t)
			rf.Annotations = map[string]string{v1alpha1.AnnotationResolve: "Failed", v1alpha1.AnnotationResolveReason: "gone"}
			return rf
		}, requery, "an earlier operator action (operator resolve) on refund partly-refunded-goodwill is still waiting"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rf := tt.refund(t)
			req, err := tt.plan(rf)
			wantRefused(t, err, tt.refused)
			if tt.refused == "" && len(req.Set) == 0 {
				t.Errorf("request %+v writes nothing", req)
			}
		})
	}
}

// TestCheckRefundActionFollowsTheManager: a resolve of a Refund is done
// when the manager acted on it and the refund is in the phase asked, or a
// refusal Event came; a requery when a status query after the request was
// answered.
func TestCheckRefundActionFollowsTheManager(t *testing.T) {
	now := fixture.ConsoleNow
	rf := underReview(consoleRefund(t, "partly-refunded-goodwill"), v1alpha1.RefundUnknown, v1alpha1.ReasonCreateOutcomeUnknown)
	req, err := plugin.PlanRefundResolve(rf, "Succeeded", "re_9 in the dashboard", now)
	if err != nil {
		t.Fatal(err)
	}
	if pr := plugin.CheckRefundAction(rf, req, nil); pr.Done || pr.Text != "the manager has not acted on the resolve yet (refund partly-refunded-goodwill is Unknown)" {
		t.Errorf("before the manager: %+v", pr)
	}
	rf.Status.Actions.Resolve = req.Value
	refusal := &eventsv1.Event{Reason: "ResolveIgnored", Note: `resolve "Succeeded" not applied: refund is already Failed and needs no review`}
	if pr := plugin.CheckRefundAction(rf, req, refusal); !pr.Done || !pr.Failed || !strings.Contains(pr.Text, "resolve refused by the manager: resolve \"Succeeded\" not applied") {
		t.Errorf("refused: %+v", pr)
	}
	rf.Status.Phase, rf.Status.Conditions = v1alpha1.RefundSucceeded, nil
	if pr := plugin.CheckRefundAction(rf, req, nil); !pr.Done || pr.Failed || pr.Text != "resolved: refund partly-refunded-goodwill is Succeeded" {
		t.Errorf("resolved: %+v", pr)
	}

	q := underReview(consoleRefund(t, "partly-refunded-goodwill"), v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted)
	before := metav1.NewMicroTime(now.Add(-time.Hour))
	q.Status.Query.LastTime = &before
	qreq, err := plugin.PlanRefundRequery(q, now)
	if err != nil {
		t.Fatal(err)
	}
	q.Status.Actions.Requery, q.Status.Query.NextTime = qreq.Value, ptrMicro(now)
	if pr := plugin.CheckRefundAction(q, qreq, nil); pr.Done || pr.Text != "the schedule restarted; the status query has not been answered yet (refund partly-refunded-goodwill is Unknown, query due at 2026-03-01T10:00:00Z)" {
		t.Errorf("requery done before the query: %+v", pr)
	}
	q.Status.Query.LastTime, q.Status.Query.NextTime = ptrMicro(now.Add(time.Second)), nil
	q.Status.Phase, q.Status.ProviderStatus, q.Status.Conditions = v1alpha1.RefundSucceeded, "succeeded", nil
	if pr := plugin.CheckRefundAction(q, qreq, nil); !pr.Done || pr.Failed || pr.Text != `queried at 2026-03-01T10:00:01Z: refund partly-refunded-goodwill is Succeeded (provider status "succeeded")` {
		t.Errorf("requery answered: %+v", pr)
	}
}

func ptrMicro(t time.Time) *metav1.MicroTime { m := metav1.NewMicroTime(t); return &m }

func TestPlanBackfill(t *testing.T) {
	now := fixture.ConsoleNow // 2026-03-01T10:00:00Z
	provider := func(annotations map[string]string) *v1alpha1.PaymentProvider {
		return &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kukopay", Annotations: annotations}}
	}
	for _, tt := range []struct {
		name, from  string
		annotations map[string]string
		value, note string
		unset       bool
		refused     string
	}{
		{name: "an RFC 3339 time", from: "2026-03-01T08:00:00Z", value: "2026-03-01T08:00:00Z"},
		{name: "another zone, written in UTC", from: "2026-03-01T09:30:00+01:00", value: "2026-03-01T08:30:00Z"},
		{name: "how far back", from: "2h", value: "2026-03-01T08:00:00Z"},
		{name: "how far back, to the second", from: "90m30.5s", value: "2026-03-01T08:29:29Z"},
		{name: "now itself", from: "2026-03-01T10:00:00Z", value: "2026-03-01T10:00:00Z"},
		{name: "in the future", from: "2026-03-01T10:00:01Z", refused: "2026-03-01T10:00:01Z is in the future (now is 2026-03-01T10:00:00Z)"},
		{name: "not a time", from: "yesterday", refused: `"yesterday" is neither an RFC 3339 time (2026-05-01T08:00:00Z) nor how far back (2h)`},
		{name: "a time without its zone", from: "2026-03-01T08:00:00", refused: "is neither an RFC 3339 time"},
		{name: "a negative duration", from: "-2h", refused: `"-2h": how far back must be positive`},
		{name: "nothing", from: " ", refused: "--from: give an RFC 3339 time"},
		{name: "the same time again runs again", from: "2h", value: "2026-03-01T08:00:00Z", unset: true,
			annotations: map[string]string{v1alpha1.AnnotationBackfillFrom: "2026-03-01T08:00:00Z", v1alpha1.AnnotationBackfillFromDone: "2026-03-01T08:00:00Z"}},
		{name: "another time replaces one not run yet", from: "3h", value: "2026-03-01T07:00:00Z",
			annotations: map[string]string{v1alpha1.AnnotationBackfillFrom: "2026-03-01T08:00:00Z"},
			note:        "it replaces payments.paywarden.dev/backfill-from=2026-03-01T08:00:00Z, which the manager had not run yet"},
		{name: "after another one ran", from: "3h", value: "2026-03-01T07:00:00Z",
			annotations: map[string]string{v1alpha1.AnnotationBackfillFrom: "2026-03-01T08:00:00Z", v1alpha1.AnnotationBackfillFromDone: "2026-03-01T08:00:00Z"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := plugin.PlanBackfill(provider(tt.annotations), tt.from, now)
			wantRefused(t, err, tt.refused)
			if tt.refused != "" {
				return
			}
			if req.Value != tt.value || req.Set[v1alpha1.AnnotationBackfillFrom] != tt.value || len(req.Set) != 1 || req.Note != tt.note || (len(req.Unset) > 0) != tt.unset {
				t.Errorf("request %+v, want backfill-from=%s, note %q, unset %v", req, tt.value, tt.note, tt.unset)
			}
		})
	}
	t.Run("a provider being deleted", func(t *testing.T) {
		p := provider(nil)
		p.DeletionTimestamp = &metav1.Time{Time: now}
		_, err := plugin.PlanBackfill(p, "2h", now)
		wantRefused(t, err, "paymentprovider kukopay is being deleted")
	})
}

func TestCheckBackfill(t *testing.T) {
	now := fixture.ConsoleNow
	prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kukopay"}}
	req, err := plugin.PlanBackfill(prov, "2h", now)
	if err != nil {
		t.Fatal(err)
	}
	condition := func(status metav1.ConditionStatus, reason, msg string) {
		prov.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionBackfill, Status: status, Reason: reason, Message: msg}}
	}
	prov.Annotations = req.Set
	condition(metav1.ConditionFalse, v1alpha1.ReasonBackfillDeferred, "provider calls deferred (circuit open)")
	if pr := plugin.CheckBackfill(prov, req, nil); pr.Done ||
		pr.Text != "the manager has not finished the replay since 2026-03-01T08:00:00Z yet (paymentprovider kukopay; Backfill Deferred: provider calls deferred (circuit open))" {
		t.Errorf("before the manager: %+v", pr)
	}
	prov.Annotations = map[string]string{v1alpha1.AnnotationBackfillFrom: req.Value, v1alpha1.AnnotationBackfillFromDone: req.Value}
	condition(metav1.ConditionTrue, v1alpha1.ReasonBackfillSynced, "read 3 event(s) since 2026-03-01T08:00:00Z: 1 new, 2 already in the inbox; cursor 2026-03-01T09:59:00Z")
	if pr := plugin.CheckBackfill(prov, req, nil); !pr.Done || pr.Failed || pr.Text != "replayed: read 3 event(s) since 2026-03-01T08:00:00Z: 1 new, 2 already in the inbox; cursor 2026-03-01T09:59:00Z" {
		t.Errorf("replayed: %+v", pr)
	}
	invalid := eventsv1.Event{Reason: "InvalidBackfillFrom", Note: "not an RFC 3339 time in the past", EventTime: metav1.NewMicroTime(now)}
	if e := plugin.Refusal("backfill", []eventsv1.Event{invalid}, now.Add(-time.Second)); e == nil {
		t.Fatal("InvalidBackfillFrom is not a refusal")
	} else if pr := plugin.CheckBackfill(prov, req, e); !pr.Done || !pr.Failed || pr.Text != "backfill refused by the manager: not an RFC 3339 time in the past" {
		t.Errorf("refused: %+v", pr)
	}
	condition(metav1.ConditionFalse, v1alpha1.ReasonBackfillUnsupported, "provider type x has no events API")
	if pr := plugin.CheckBackfill(prov, req, nil); !pr.Done || !pr.Failed || pr.Text != "not replayed: Backfill Unsupported: provider type x has no events API" {
		t.Errorf("unsupported: %+v", pr)
	}
}
