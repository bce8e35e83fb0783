package paysim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestControlAPI drives paysim over HTTP the way the dev environment and
// out-of-process suites do.
func TestControlAPI(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 0.001})
	base := e.srv.URL + "/_paysim"
	rcv := newReceiver(t, e.p[paysim.Generic], [][]byte{[]byte("whsec_YWJjZGVm")}, nil)

	if code, body := call(t, "PUT", base+"/faults", `{"dropRate":0.5,"retryAfter":"2s"}`); code != 200 || !strings.Contains(body, `"retryAfter":"2s"`) {
		t.Fatalf("faults: %d %s", code, body)
	}
	if f := e.sim.Faults(); f.DropRate != 0.5 || f.RetryAfter.Seconds() != 2 {
		t.Fatalf("faults not applied: %+v", f)
	}
	call(t, "PUT", base+"/faults", `{}`)
	if code, body := call(t, "POST", base+"/scripts", `{"amount":777,"script":{"outcome":"fail","failureCode":"insufficient_funds"}}`); code != 201 {
		t.Fatalf("scripts: %d %s", code, body)
	}
	if code, _ := call(t, "POST", base+"/scripts", `{"script":{"outcome":"explode"}}`); code != 400 {
		t.Fatalf("bad outcome accepted: %d", code)
	}
	if code, body := call(t, "PUT", base+"/webhooks/generic", `{"url":"`+rcv.srv.URL+`","secrets":["whsec_YWJjZGVm"]}`); code != 204 {
		t.Fatalf("webhooks: %d %s", code, body)
	}
	if code, _ := call(t, "PUT", base+"/webhooks/adyen", `{"url":"x"}`); code != 404 {
		t.Fatal("unknown provider accepted")
	}

	failing := e.create(t, paysim.Generic, "k1", "r1", 777, nil)
	eventually(t, "scripted failure", func() bool {
		p, err := e.p[paysim.Generic].Get(context.Background(), failing.ID)
		return err == nil && p.Status == provider.StatusFailed && p.FailureCode == "insufficient_funds"
	})
	other := e.create(t, paysim.Generic, "k2", "r2", 100, nil)
	if code, body := call(t, "POST", base+"/payments/generic/"+other.ID+"/outcome", `{"outcome":"succeed","after":"1s"}`); code != 204 {
		t.Fatalf("outcome: %d %s", code, body)
	}
	eventually(t, "success delivered", func() bool { return e.sim.Counters().Webhooks.Delivered == 2 })
	if code, body := call(t, "POST", base+"/payments/generic/"+other.ID+"/refund", `{"amount":40}`); code != 204 {
		t.Fatalf("refund: %d %s", code, body)
	}
	if code, _ := call(t, "POST", base+"/payments/generic/"+other.ID+"/dispute", ""); code != 204 {
		t.Fatal("dispute")
	}
	// Delivered is counted once the receiver's answer is back, so wait on the counter.
	eventually(t, "refund and dispute delivered", func() bool { return e.sim.Counters().Webhooks.Delivered == 4 })
	for _, d := range rcv.deliveries() {
		if d.verifyErr != nil {
			t.Fatalf("delivery not verifiable: %v", d.verifyErr)
		}
	}

	code, body := call(t, "GET", base+"/counters", "")
	var c paysim.Counters
	if code != 200 || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("counters: %d %s", code, body)
	}
	if c.PaymentsCreated != 2 || c.CreatesByKey["generic/k1"] != 1 || c.Webhooks.Delivered != 4 || c.QueriesByPayment[failing.ID] == 0 {
		t.Fatalf("counters %+v", c)
	}
	code, body = call(t, "GET", base+"/payments/generic/"+other.ID, "")
	if code != 200 || !strings.Contains(body, `"refunded":40`) {
		t.Fatalf("payment view: %d %s", code, body)
	}
	code, body = call(t, "GET", base+"/events/generic", "")
	if code != 200 || strings.Count(body, `"type":"job.`) < 4 {
		t.Fatalf("events: %d %s", code, body)
	}
	if code, _ := call(t, "POST", base+"/counters/reset", ""); code != 204 || e.sim.Counters().PaymentsCreated != 0 {
		t.Fatal("reset")
	}
}

// A rule added through the Go control client scripts the next matching payment,
// and a bad one comes back as an error naming paysim's reason.
func TestControlClientScript(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 0.001})
	control := paysim.NewControlClient(e.srv.URL)
	if err := control.Script(context.Background(), paysim.Rule{Provider: paysim.KukoPay, MerchantReference: "ref-fail",
		Script: paysim.Script{Outcome: paysim.OutcomeFail, FailureCode: "do_not_honor"}}); err != nil {
		t.Fatal(err)
	}
	if err := control.Script(context.Background(), paysim.Rule{Provider: "adyen", Script: paysim.Script{Outcome: paysim.OutcomeFail}}); err == nil || !strings.Contains(err.Error(), "adyen") {
		t.Fatalf("unknown provider: %v", err)
	}
	p := e.create(t, paysim.KukoPay, "k1", "ref-fail", 500, nil)
	eventually(t, "scripted failure", func() bool {
		got, err := e.p[paysim.KukoPay].Get(context.Background(), p.ID)
		return err == nil && got.Status == provider.StatusFailed && got.FailureCode == "do_not_honor"
	})
}

// The Go control client reads what the Sim holds and changes what the Sim
// methods of the same names change.
func TestControlClientMirrorsTheSim(t *testing.T) {
	ctx := context.Background()
	e := start(t, paysim.Options{TimeFactor: 0.001})
	control := paysim.NewControlClient(e.srv.URL)
	rcv := newReceiver(t, e.p[paysim.Generic], [][]byte{[]byte("whsec_YWJjZGVm")}, nil)
	if err := control.SetWebhookTarget(ctx, paysim.Generic, rcv.srv.URL, "whsec_YWJjZGVm"); err != nil {
		t.Fatal(err)
	}
	if err := control.SetWebhookTarget(ctx, "adyen", rcv.srv.URL); err == nil {
		t.Fatal("a webhook target for an unknown provider was accepted")
	}
	p := e.create(t, paysim.Generic, "k1", "ref-1", 500, nil)
	if err := e.sim.Dispute(paysim.Generic, p.ID, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the dispute's delivery", func() bool { return len(rcv.deliveries()) > 0 })

	views, err := control.Payments(ctx, paysim.Generic)
	if err != nil || len(views) != 1 || views[0].ID != p.ID {
		t.Fatalf("payments %+v %v, want the one of %s", views, err, p.ID)
	}
	evs, err := control.Events(ctx, paysim.Generic)
	want := e.sim.Events(paysim.Generic)
	if err != nil || len(evs) != len(want) || len(evs) == 0 {
		t.Fatalf("events %+v %v, want %+v", evs, err, want)
	}
	for i := range evs {
		if evs[i].ID != want[i].ID || evs[i].Type != want[i].Type || evs[i].PaymentID != want[i].PaymentID || string(evs[i].Raw) != string(want[i].Raw) {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
	if err := control.StripeFailRefund(ctx, "re_none", ""); err == nil {
		t.Error("an unknown Stripe refund failed")
	}
	if err := control.ResetCounters(ctx); err != nil || e.sim.Counters().PaymentsCreated != 0 {
		t.Fatalf("reset: %v, %d payments counted", err, e.sim.Counters().PaymentsCreated)
	}
}
