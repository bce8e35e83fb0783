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
