package webhookreceiver_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
)

// Issue 5, test 1.
func TestVerifiedEventIsStoredOnceAndMovesThePayment(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-1", "order-1", "pay_1", 1999)
	accepted := webhookCount(t, k.ns, k.name, metrics.WebhookAccepted)

	r := k.deliver(t, k.event("evt_1", "payment.succeeded", "succeeded", p))
	wantCode(t, r, http.StatusOK)
	if !strings.Contains(r.Body, metrics.WebhookAccepted) {
		t.Errorf("answer %q does not say accepted", r.Body)
	}

	// The 200 means "stored and applied": the payment moved before the
	// answer. The result on the record follows the answer.
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("acknowledged before the payment moved: phase %q", got.Status.Phase)
	}
	fixture.WaitEventResult(t, env.Client, k.ns, k.name, "evt_1", "", fixture.Timeout)
	evs := fixture.WebhookEvents(t, env.Client, k.ns)
	if len(evs) != 1 {
		t.Fatalf("%d WebhookEvents, want 1", len(evs))
	}
	e := evs[0]
	if e.Name != v1alpha1.WebhookEventName(k.name, "evt_1") {
		t.Errorf("event named %s, want the deterministic %s", e.Name, v1alpha1.WebhookEventName(k.name, "evt_1"))
	}
	if e.Status.Result != v1alpha1.ResultApplied || e.Status.Attempts != 1 || e.Status.AppliedAt == nil {
		t.Errorf("event status %+v, want Applied after 1 attempt with appliedAt", e.Status)
	}
	if e.Spec.Via != v1alpha1.ViaWebhook || e.Spec.Payment != p.Name || e.Spec.SignatureScheme != provider.SchemeKukoPay ||
		e.Spec.Type != "payment.succeeded" || e.Spec.ProviderPaymentID != "pay_1" || e.Spec.MerchantReference != "order-1" {
		t.Errorf("event spec %+v does not describe the delivery", e.Spec)
	}
	if e.Spec.Payload == "" || len(e.Spec.PayloadSHA256) != 64 || e.Spec.PayloadTruncated {
		t.Errorf("payload not stored whole with its sha256: truncated=%v sha=%q", e.Spec.PayloadTruncated, e.Spec.PayloadSHA256)
	}

	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhaseSucceeded || fixture.Transitions(got) != 1 {
		t.Fatalf("payment %s with %d transitions, want Succeeded after 1", got.Status.Phase, fixture.Transitions(got))
	}
	if got.Status.LastEvent == nil || got.Status.LastEvent.ID != "evt_1" || got.Status.LastEvent.Source != v1alpha1.SourceWebhook {
		t.Errorf("lastEvent %+v, want evt_1 via Webhook", got.Status.LastEvent)
	}
	if got.Status.AmountReceived == nil || got.Status.AmountReceived.Value != 1999 {
		t.Errorf("amountReceived %+v, want 1999 USD", got.Status.AmountReceived)
	}
	if d := webhookCount(t, k.ns, k.name, metrics.WebhookAccepted) - accepted; d != 1 {
		t.Errorf("accepted counter moved by %v, want 1", d)
	}
}

// Issue 5, test 2.
func TestRepeatedDeliveriesStoreAndApplyOnce(t *testing.T) {
	k := newKukoPay(t)

	t.Run("twice in a row", func(t *testing.T) {
		p := k.payment(t, "order-seq", "order-seq", "pay_seq", 500)
		ev := k.event("evt_seq", "payment.succeeded", "succeeded", p)
		counts := k.answerCounts(t)
		first, second := k.deliver(t, ev), k.deliver(t, ev)
		wantCode(t, first, http.StatusOK)
		wantCode(t, second, http.StatusOK)
		if a, b := answered(t, first), answered(t, second); a != metrics.WebhookAccepted || b != metrics.WebhookDuplicate {
			t.Errorf("answers %q then %q, want accepted then duplicate (the copy was not stored again)", a, b)
		}
		counts.wantMoved(t, 1, 1)
		assertOnce(t, k, p, "evt_seq")
	})

	t.Run("a copy stored again of an event the payment already applied is accepted", func(t *testing.T) {
		// The payment remembers evt_old, but its inbox record is gone
		// (retention) and so is its history entry (past MaxHistory): a
		// late copy is stored as a new record, which the payment answers
		// Duplicate. The delivery was stored, so it is answered accepted;
		// only a copy the inbox already holds is answered duplicate.
		p := k.payment(t, "order-old", "order-old", "pay_old", 300)
		wantCode(t, k.deliver(t, k.event("evt_new", "payment.succeeded", "succeeded", p)), http.StatusOK)
		p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
			st.RecentEventIDs = append([]string{"evt_old"}, st.RecentEventIDs...)
		})
		fixture.WaitCached(t, rcv.Cache, p)

		ev := k.event("evt_old", "payment.succeeded", "succeeded", p)
		counts := k.answerCounts(t)
		r := k.deliver(t, ev)
		wantCode(t, r, http.StatusOK)
		if got := answered(t, r); got != metrics.WebhookAccepted {
			t.Errorf("answer %q, want accepted: the copy was stored", got)
		}
		counts.wantMoved(t, 1, 0)
		if e := fixture.WaitEventResult(t, env.Client, k.ns, k.name, "evt_old", v1alpha1.ResultDuplicate, fixture.Timeout); e.Spec.Payment != p.Name {
			t.Errorf("event for payment %q, want %s", e.Spec.Payment, p.Name)
		}

		counts = k.answerCounts(t)
		r = k.deliver(t, ev)
		wantCode(t, r, http.StatusOK)
		if got := answered(t, r); got != metrics.WebhookDuplicate {
			t.Errorf("answer to the next copy %q, want duplicate: the inbox holds it", got)
		}
		counts.wantMoved(t, 0, 1)
		assertOnce(t, k, p, "evt_old")
	})

	t.Run("twenty at once", func(t *testing.T) {
		p := k.payment(t, "order-par", "order-par", "pay_par", 700)
		ev := k.event("evt_par", "payment.succeeded", "succeeded", p)
		body := ev.Body(t)
		// Every copy carries its own fresh signature, as a provider's
		// retries do; the dedup must not depend on identical requests.
		counts := k.answerCounts(t)
		var wg sync.WaitGroup
		answers := make([]fixture.Response, 20)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = fixture.Send(t, "POST", k.url(), body, fixture.KukoPayHeader(body, time.Now(), k.secret))
			}()
		}
		wg.Wait()
		results := map[string]int{}
		for _, a := range answers {
			wantCode(t, a, http.StatusOK)
			results[answered(t, a)]++
		}
		if results[metrics.WebhookAccepted] != 1 || results[metrics.WebhookDuplicate] != 19 {
			t.Errorf("answers %v to 20 concurrent copies, want exactly 1 accepted and the rest duplicate", results)
		}
		counts.wantMoved(t, 1, 19)
		assertOnce(t, k, p, "evt_par")
	})
}

func assertOnce(t *testing.T, k kukoPay, p *v1alpha1.Payment, eventID string) {
	t.Helper()
	n := 0
	for _, e := range fixture.WebhookEvents(t, env.Client, k.ns) {
		if e.Spec.EventID == eventID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d WebhookEvents for %s, want 1", n, eventID)
	}
	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhaseSucceeded || fixture.Transitions(got) != 1 || len(got.Status.History) != 1 {
		t.Errorf("payment %s with history %+v, want Succeeded after exactly one transition", got.Status.Phase, got.Status.History)
	}
}

// Issue 5, test 3. KukoPay sends no processing events; the generic provider does.
func TestProcessingAfterSucceededIsStale(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "recv")
	secret := "whsec_" + "c3RhbGUtdGVzdC1zZWNyZXQ=" // base64("stale-test-secret")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "jobs", Type: v1alpha1.ProviderGeneric, SigningSecrets: map[string]string{"current": secret},
	})
	waitProviderCached(t, prov)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-3", Provider: "jobs", MerchantReference: "order-3", ProviderPaymentID: "job_3", Amount: 1200, Currency: "EUR"})
	fixture.WaitCached(t, rcv.Cache, p)
	url := rcv.WebhookURL(ns, "jobs")
	send := func(ev fixture.GenericEvent) fixture.Response {
		body := ev.Body(t)
		return fixture.Send(t, "POST", url, body, fixture.GenericHeader(t, ev.ID, body, time.Now(), secret))
	}
	now := time.Now()
	succeeded := fixture.GenericEvent{ID: "msg_succeeded", Type: "job.succeeded", JobID: "job_3", CorrelationID: "order-3", JobStatus: "succeeded", Amount: 1200, Currency: "EUR", Timestamp: now}
	processing := fixture.GenericEvent{ID: "msg_processing", Type: "job.processing", JobID: "job_3", CorrelationID: "order-3", JobStatus: "processing", Amount: 1200, Currency: "EUR", Timestamp: now.Add(-time.Minute)}

	wantCode(t, send(succeeded), http.StatusOK)
	wantCode(t, send(processing), http.StatusOK)

	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhaseSucceeded || fixture.Transitions(got) != 1 {
		t.Fatalf("payment %s after %d transitions, want to stay Succeeded after 1", got.Status.Phase, fixture.Transitions(got))
	}
	if e := fixture.WaitEventResult(t, env.Client, ns, "jobs", "msg_processing", "", fixture.Timeout); e == nil || e.Status.Result != v1alpha1.ResultStale {
		t.Fatalf("late processing event %+v, want result Stale", e)
	}
	if e := fixture.WaitEventResult(t, env.Client, ns, "jobs", "msg_succeeded", "", fixture.Timeout); e == nil || e.Status.Result != v1alpha1.ResultApplied {
		t.Fatalf("succeeded event %+v, want result Applied", e)
	}
}

// Issue 5, test 4.
func TestInvalidSignaturesAreRejectedAndNothingIsWritten(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-4", "order-4", "pay_4", 900)
	before := webhookCount(t, k.ns, k.name, metrics.WebhookInvalidSignature)
	cases := []struct {
		name   string
		header func(body []byte) http.Header
		body   func(body []byte) []byte
	}{
		{name: "signed with a secret that is not configured", header: func(b []byte) http.Header {
			return fixture.KukoPayHeader(b, time.Now(), "not-the-secret")
		}},
		{name: "timestamp six minutes old", header: func(b []byte) http.Header {
			return fixture.KukoPayHeader(b, time.Now().Add(-6*time.Minute), k.secret)
		}},
		{name: "timestamp six minutes ahead", header: func(b []byte) http.Header {
			return fixture.KukoPayHeader(b, time.Now().Add(6*time.Minute), k.secret)
		}},
		{name: "signature header missing", header: func([]byte) http.Header { return http.Header{"Content-Type": {"application/json"}} }},
		{name: "signature header malformed", header: func([]byte) http.Header {
			return http.Header{"X-Kukopay-Signature": {"v1;deadbeef"}}
		}},
		{name: "signature header without a v1", header: func([]byte) http.Header {
			return http.Header{"X-Kukopay-Signature": {"t=" + time.Now().Format("20060102")}}
		}},
		{name: "body changed after signing", header: func(b []byte) http.Header {
			return fixture.KukoPayHeader(b, time.Now(), k.secret)
		}, body: func(b []byte) []byte { return bytes.Replace(b, []byte(`"amount":900`), []byte(`"amount":9`), 1) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := k.event("evt_bad_"+string(rune('a'+i)), "payment.succeeded", "succeeded", p)
			body := ev.Body(t)
			h := tc.header(body)
			if tc.body != nil {
				body = tc.body(body)
			}
			r := fixture.Send(t, "POST", k.url(), body, h)
			wantCode(t, r, http.StatusUnauthorized)
		})
	}
	wantNoEvents(t, k.ns)
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != "" || got.ResourceVersion != p.ResourceVersion {
		t.Errorf("payment changed by rejected requests: phase %q", got.Status.Phase)
	}
	if d := webhookCount(t, k.ns, k.name, metrics.WebhookInvalidSignature) - before; d != float64(len(cases)) {
		t.Errorf("invalid_signature counter moved by %v, want %d", d, len(cases))
	}
}

// TestAWhitespaceSigningSecretVerifiesNothing: the manager copies every
// non-empty value of the signing Secret into the bundle, so a key that is
// only whitespace reaches the adapter. It is never an HMAC key: a request
// signed with it is rejected like any bad signature and nothing is written.
func TestAWhitespaceSigningSecretVerifiesNothing(t *testing.T) {
	const blank = " \n"
	k := newKukoPay(t, func(p *fixture.Provider) { p.SigningSecrets = map[string]string{"current": blank} })
	p := k.payment(t, "order-blank", "order-blank", "pay_blank", 100)
	before := webhookCount(t, k.ns, k.name, metrics.WebhookInvalidSignature)

	body := k.event("evt_blank", "payment.succeeded", "succeeded", p).Body(t)
	wantCode(t, fixture.Send(t, "POST", k.url(), body, fixture.KukoPayHeader(body, time.Now(), blank)), http.StatusUnauthorized)

	wantNoEvents(t, k.ns)
	if d := webhookCount(t, k.ns, k.name, metrics.WebhookInvalidSignature) - before; d != 1 {
		t.Errorf("invalid_signature counter moved by %v, want 1", d)
	}
}

// TestALowerCaseCurrencyIsItsISOCode: KukoPay's "usd" is the code USD (as
// Stripe writes every code). Before, the amount check took it for another
// currency and the status write it made (amountReceived "usd") was refused
// by the schema: acknowledged, the event never moved the payment.
func TestALowerCaseCurrencyIsItsISOCode(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-lc", "order-lc", "pay_lc", 1999)
	ev := k.event("evt_lc", "payment.succeeded", "succeeded", p)
	ev.Currency = "usd"
	wantCode(t, k.deliver(t, ev), http.StatusOK)
	if e := fixture.WaitEventResult(t, env.Client, k.ns, k.name, "evt_lc", "", fixture.Timeout); e == nil || e.Status.Result != v1alpha1.ResultApplied {
		t.Fatalf("event %+v, want result Applied", e)
	}
	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.AmountReceived == nil || got.Status.AmountReceived.Currency != "USD" {
		t.Errorf("payment %s, amount received %+v: want Succeeded with 1999 USD", got.Status.Phase, got.Status.AmountReceived)
	}
}

// TestAnEncodedBodyIsUnsupportedNotAForgery: a genuine delivery whose body is
// gzip-encoded (signed over the JSON it carries) was verified as it came,
// answered 401 and counted invalid_signature, the signal behind the
// signature-failure alert. A content coding other than identity is answered
// 415 with Accept-Encoding: identity (RFC 9110 §15.5.16) before any
// verification, counted malformed; nothing is written.
func TestAnEncodedBodyIsUnsupportedNotAForgery(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-gz", "order-gz", "pay_gz", 1999)
	forgeries := webhookCount(t, k.ns, k.name, metrics.WebhookInvalidSignature)
	malformed := webhookCount(t, k.ns, k.name, metrics.WebhookMalformed)
	body := k.event("evt_gz", "payment.succeeded", "succeeded", p).Body(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, coding := range []string{"gzip", "identity, gzip", "br"} {
		h := fixture.KukoPayHeader(body, time.Now(), k.secret)
		h.Set("Content-Encoding", coding)
		r := fixture.Send(t, "POST", k.url(), gz.Bytes(), h)
		wantCode(t, r, http.StatusUnsupportedMediaType)
		if r.Header.Get("Accept-Encoding") != "identity" || !strings.Contains(r.Body, "Content-Encoding") {
			t.Errorf("%s: Accept-Encoding %q, body %s: want identity and a message naming the Content-Encoding", coding, r.Header.Get("Accept-Encoding"), r.Body)
		}
	}
	wantNoEvents(t, k.ns)
	if d := webhookCount(t, k.ns, k.name, metrics.WebhookInvalidSignature) - forgeries; d != 0 {
		t.Errorf("invalid_signature counter moved by %v for encoded bodies, want 0", d)
	}
	if d := webhookCount(t, k.ns, k.name, metrics.WebhookMalformed) - malformed; d != 3 {
		t.Errorf("malformed counter moved by %v, want 3", d)
	}
	h := fixture.KukoPayHeader(body, time.Now(), k.secret)
	h.Set("Content-Encoding", "identity")
	wantCode(t, fixture.Send(t, "POST", k.url(), body, h), http.StatusOK)
}

// TestABareBase64GenericSecretVerifiesTheLibrarysDeliveries: a generic
// provider whose signing Secret holds the endpoint secret as the Standard
// Webhooks library's README spells it (bare base64: NewWebhook(base64Secret))
// and a delivery the official library signed with it. The PaymentProvider
// was accepted and every genuine delivery answered 401: the bare string was
// used as raw bytes only.
func TestABareBase64GenericSecretVerifiesTheLibrarysDeliveries(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "bare")
	bare := base64.StdEncoding.EncodeToString([]byte("a 32-byte endpoint key, no whsec")) // no whsec_ prefix
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "jobs", Type: v1alpha1.ProviderGeneric, SigningSecrets: map[string]string{"current": bare},
	})
	waitProviderCached(t, prov)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-b1", Provider: "jobs", MerchantReference: "order-b1", ProviderPaymentID: "job_b1", Amount: 1200, Currency: "EUR"})
	fixture.WaitCached(t, rcv.Cache, p)

	ev := fixture.GenericEvent{ID: "msg_bare", Type: "job.succeeded", JobID: "job_b1", CorrelationID: "order-b1", JobStatus: "succeeded", Amount: 1200, Currency: "EUR"}
	body := ev.Body(t)
	wh, err := standardwebhooks.NewWebhook(bare)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(ev.ID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(generic.HeaderWebhookID, ev.ID)
	h.Set(generic.HeaderWebhookTS, strconv.FormatInt(now.Unix(), 10))
	h.Set(generic.HeaderWebhookSig, sig)
	h.Set("Content-Type", "application/json")
	wantCode(t, fixture.Send(t, "POST", rcv.WebhookURL(ns, "jobs"), body, h), http.StatusOK)
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("payment %s after the library-signed delivery, want Succeeded", got.Status.Phase)
	}
}

// Issue 5, test 5.
func TestRejectedRequestsWriteNothing(t *testing.T) {
	k := newKukoPay(t, func(p *fixture.Provider) { p.MaxBodyBytes = 1024 })
	p := k.payment(t, "order-5", "order-5", "pay_5", 900)
	big := bytes.Repeat([]byte("x"), 2048)
	signed := func(body []byte) http.Header { return fixture.KukoPayHeader(body, time.Now(), k.secret) }
	// Signed, well-formed events that can never be stored (the record's
	// schema refuses them): 400, so the provider stops; 503 would make it
	// retry for days.
	longID := fixture.KukoPayEvent{ID: strings.Repeat("e", 513), Type: "payment.succeeded", PaymentID: "pay_5", MerchantRef: "order-5", Status: "succeeded", Amount: 900, Currency: "USD"}.Body(t)
	longRef := fixture.KukoPayEvent{ID: "evt_longref", Type: "payment.succeeded", PaymentID: "pay_5", MerchantRef: strings.Repeat("r", 256), Status: "succeeded", Amount: 900, Currency: "USD"}.Body(t)
	// Events whose currency or time no Payment status can hold (^[A-Z]{3}$,
	// RFC 3339 years 0000-9999): acknowledged, every status write was
	// refused and the payment stayed where it was for good.
	badCurrency := fixture.KukoPayEvent{ID: "evt_badcur", Type: "payment.succeeded", PaymentID: "pay_5", MerchantRef: "order-5", Status: "succeeded", Amount: 900, Currency: "US"}.Body(t)
	noCurrency := fixture.KukoPayEvent{ID: "evt_nocur", Type: "payment.succeeded", PaymentID: "pay_5", MerchantRef: "order-5", Status: "succeeded", Amount: 1}.Body(t)
	year10000 := fixture.KukoPayEvent{ID: "evt_y10k", Type: "payment.succeeded", PaymentID: "pay_5", MerchantRef: "order-5", Status: "succeeded", Amount: 900, Currency: "USD", Created: time.Unix(253402300800, 0)}.Body(t)
	cases := []struct {
		name   string
		method string
		path   string
		body   []byte
		header http.Header
		// chunked hides the length, so the cap must hold while reading.
		chunked bool
		code    int
	}{
		{name: "body over maxBodyBytes", method: "POST", body: big, header: signed(big), code: http.StatusRequestEntityTooLarge},
		{name: "body over maxBodyBytes without a length", method: "POST", body: big, header: signed(big), chunked: true, code: http.StatusRequestEntityTooLarge},
		{name: "signed body that is not JSON", method: "POST", body: []byte("{not json"), header: signed([]byte("{not json")), code: http.StatusBadRequest},
		{name: "signed JSON that is not an event", method: "POST", body: []byte(`{"object":"event"}`), header: signed([]byte(`{"object":"event"}`)), code: http.StatusBadRequest},
		{name: "signed event whose id can never be stored", method: "POST", body: longID, header: signed(longID), code: http.StatusBadRequest},
		{name: "signed event whose reference can never be stored", method: "POST", body: longRef, header: signed(longRef), code: http.StatusBadRequest},
		{name: "signed event whose currency no status can hold", method: "POST", body: badCurrency, header: signed(badCurrency), code: http.StatusBadRequest},
		{name: "signed success stating an amount without a currency", method: "POST", body: noCurrency, header: signed(noCurrency), code: http.StatusBadRequest},
		{name: "signed event created in the year 10000", method: "POST", body: year10000, header: signed(year10000), code: http.StatusBadRequest},
		{name: "unknown provider", method: "POST", path: "/webhooks/" + k.ns + "/nope", code: http.StatusNotFound},
		{name: "provider in another namespace", method: "POST", path: "/webhooks/default/" + k.name, code: http.StatusNotFound},
		{name: "path with an extra segment", method: "POST", path: "/webhooks/" + k.ns + "/" + k.name + "/x", code: http.StatusNotFound},
		{name: "unclean path is not redirected", method: "POST", path: "/webhooks/" + k.ns + "//" + k.name, code: http.StatusNotFound},
		{name: "trailing slash is not redirected", method: "POST", path: "/webhooks/" + k.ns + "/", code: http.StatusNotFound},
		{name: "GET", method: "GET", code: http.StatusMethodNotAllowed},
		{name: "PUT", method: "PUT", body: []byte("{}"), code: http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := k.url()
			if tc.path != "" {
				url = rcv.URL + tc.path
			}
			var r fixture.Response
			if tc.chunked {
				r = sendChunked(t, url, tc.body, tc.header)
			} else {
				r = fixture.Send(t, tc.method, url, tc.body, tc.header)
			}
			wantCode(t, r, tc.code)
			if tc.code == http.StatusMethodNotAllowed && r.Header.Get("Allow") != "POST" {
				t.Errorf("405 without Allow: POST (got %q)", r.Header.Get("Allow"))
			}
		})
	}
	wantNoEvents(t, k.ns)
	if got := fixture.GetPayment(t, env.Client, p); got.ResourceVersion != p.ResourceVersion {
		t.Errorf("payment written by rejected requests")
	}
}

// TestBodyLimitIsExact: a signed body of exactly maxBodyBytes is read and
// acknowledged, one byte more is 413, whether the length is declared or not.
func TestBodyLimitIsExact(t *testing.T) {
	const limit = 1024
	k := newKukoPay(t, func(p *fixture.Provider) { p.MaxBodyBytes = limit })
	// sized is a signed event grown to n bytes with trailing JSON whitespace.
	sized := func(id string, n int) []byte {
		b := fixture.KukoPayEvent{ID: id, Type: "customer.created", PaymentID: "pay_l", MerchantRef: "order-l", Status: "succeeded", Amount: 900, Currency: "USD"}.Body(t)
		return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
	}
	cases := []struct {
		name    string
		body    []byte
		chunked bool
		code    int
	}{
		{"exactly the limit, length declared", sized("evt_limit_declared", limit), false, http.StatusOK},
		{"exactly the limit, without a length", sized("evt_limit_chunked", limit), true, http.StatusOK},
		{"one byte over, length declared", sized("evt_over_declared", limit+1), false, http.StatusRequestEntityTooLarge},
		{"one byte over, without a length", sized("evt_over_chunked", limit+1), true, http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fixture.KukoPayHeader(tc.body, time.Now(), k.secret)
			var r fixture.Response
			if tc.chunked {
				r = sendChunked(t, k.url(), tc.body, h)
			} else {
				r = fixture.Send(t, "POST", k.url(), tc.body, h)
			}
			wantCode(t, r, tc.code)
		})
	}
	wantNoEventsExcept(t, k.ns, "evt_limit_declared", "evt_limit_chunked")
}

// sendChunked posts body without a Content-Length.
func sendChunked(t *testing.T, url string, body []byte, h http.Header) fixture.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, struct{ *bytes.Reader }{bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if req.ContentLength > 0 {
		t.Fatalf("request had a length; the chunked path was not exercised")
	}
	return fixture.Response{Code: resp.StatusCode, Header: resp.Header}
}

// Issue 5, test 6.
func TestUnsupportedEventTypeIsAcknowledgedAndIgnored(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-6", "order-6", "pay_6", 900)
	for _, typ := range []string{"payment.requires_action", "customer.created"} {
		t.Run(typ, func(t *testing.T) {
			ev := k.event("evt_"+typ, typ, "succeeded", p)
			r := k.deliver(t, ev)
			wantCode(t, r, http.StatusOK)
			if !strings.Contains(r.Body, metrics.WebhookIgnored) {
				t.Errorf("answer %q, want ignored", r.Body)
			}
			e := fixture.WaitEventResult(t, env.Client, k.ns, k.name, ev.ID, "", fixture.Timeout)
			if e == nil || e.Status.Result != v1alpha1.ResultIgnored {
				t.Fatalf("event %+v, want stored with result Ignored", e)
			}
		})
	}
	if got := fixture.GetPayment(t, env.Client, p); got.ResourceVersion != p.ResourceVersion {
		t.Errorf("an ignored event changed the payment (phase %q)", got.Status.Phase)
	}
}

// Issue 5, test 10.
func TestProvidersOnlyTouchTheirOwnNamespace(t *testing.T) {
	a := newKukoPay(t, func(p *fixture.Provider) { p.SigningSecrets = map[string]string{"k": "secret-of-a"} })
	a.secret = "secret-of-a"
	b := newKukoPay(t, func(p *fixture.Provider) { p.SigningSecrets = map[string]string{"k": "secret-of-b"} })
	b.secret = "secret-of-b"
	// Same provider name, merchant reference and provider payment id in both.
	pa := a.payment(t, "order", "order-10", "pay_same", 1000)
	pb := b.payment(t, "order", "order-10", "pay_same", 1000)

	// A second provider in namespace a, whose events carry the same ids.
	other := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: a.ns, Name: "other", Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"k": "secret-of-other"},
	})
	waitProviderCached(t, other)

	wantCode(t, a.deliver(t, a.event("evt_a", "payment.succeeded", "succeeded", pa)), http.StatusOK)
	if got := fixture.GetPayment(t, env.Client, pb); got.ResourceVersion != pb.ResourceVersion {
		t.Fatalf("provider a's event touched namespace b's payment (phase %q)", got.Status.Phase)
	}
	wantCode(t, b.deliver(t, b.event("evt_b", "payment.failed", "failed", pb)), http.StatusOK)
	ga, gb := fixture.GetPayment(t, env.Client, pa), fixture.GetPayment(t, env.Client, pb)
	if ga.Status.Phase != v1alpha1.PhaseSucceeded || gb.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("phases a=%s b=%s, want a Succeeded and b Failed (no cross-talk)", ga.Status.Phase, gb.Status.Phase)
	}
	if fixture.Transitions(ga) != 1 || fixture.Transitions(gb) != 1 {
		t.Fatalf("transitions a=%d b=%d, want 1 each", fixture.Transitions(ga), fixture.Transitions(gb))
	}

	t.Run("the same event id is a separate event per tenant", func(t *testing.T) {
		for _, k := range []kukoPay{a, b} {
			wantCode(t, k.deliver(t, k.event("evt_shared", "dispute.created", "succeeded", pa)), http.StatusOK)
			if e := fixture.WebhookEventFor(t, env.Client, k.ns, k.name, "evt_shared"); e == nil || e.Status.Result == v1alpha1.ResultDuplicate {
				t.Errorf("namespace %s: event %+v, want its own record", k.ns, e)
			}
		}
	})

	t.Run("a's signature is not valid at b", func(t *testing.T) {
		ev := a.event("evt_cross", "payment.succeeded", "succeeded", pb)
		body := ev.Body(t)
		wantCode(t, fixture.Send(t, "POST", b.url(), body, fixture.KukoPayHeader(body, time.Now(), a.secret)), http.StatusUnauthorized)
	})

	t.Run("another provider's event does not match a's payment", func(t *testing.T) {
		ev := a.event("evt_other", "payment.failed", "failed", pa)
		body := ev.Body(t)
		r := fixture.Send(t, "POST", rcv.WebhookURL(a.ns, "other"), body, fixture.KukoPayHeader(body, time.Now(), "secret-of-other"))
		wantCode(t, r, http.StatusOK)
		if e := fixture.WaitEventResult(t, env.Client, a.ns, "other", "evt_other", "", fixture.Timeout); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
			t.Fatalf("event %+v, want Orphaned: payment %s references provider kukopay, not other", e, pa.Name)
		}
		if got := fixture.GetPayment(t, env.Client, pa); got.Status.Phase != v1alpha1.PhaseSucceeded || hasReview(got) {
			t.Fatalf("provider other's event reached payment %s: phase %s, conditions %+v", pa.Name, got.Status.Phase, got.Status.Conditions)
		}
	})
}

func hasReview(p *v1alpha1.Payment) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionNeedsReview && c.Status == "True" {
			return true
		}
	}
	return false
}

// Issue 5, test 11.
func TestSecretRotation(t *testing.T) {
	k := newKukoPay(t, func(p *fixture.Provider) { p.SigningSecrets = map[string]string{"old": "secret-old"} })
	ctx := context.Background()
	n := 0
	send := func(secrets ...string) int {
		n++
		ev := fixture.KukoPayEvent{ID: "evt_rot_" + string(rune('a'+n)), Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_rot", MerchantRef: "order-rot", Amount: 1, Currency: "USD"}
		body := ev.Body(t)
		return fixture.Send(t, "POST", k.url(), body, fixture.KukoPayHeader(body, time.Now(), secrets...)).Code
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.prov.Spec.Webhook.SigningSecretRef.Name}, secret); err != nil {
		t.Fatal(err)
	}
	update := func(data map[string]string) {
		t.Helper()
		secret.Data = map[string][]byte{}
		for key, v := range data {
			secret.Data[key] = []byte(v)
		}
		if err := env.Client.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		// "The next request" is the first one after the manager copied the
		// new keys into the provider's bundle and the receiver's cache has
		// it; no restart, no sleep.
		var values []string
		for _, v := range data {
			values = append(values, v)
		}
		fixture.WaitBundleSecrets(t, rcv.Cache, k.prov, values...)
	}

	if code := send("secret-old"); code != http.StatusOK {
		t.Fatalf("old secret before rotation: %d, want 200", code)
	}
	if code := send("secret-new"); code != http.StatusUnauthorized {
		t.Fatalf("new secret before it was added: %d, want 401", code)
	}
	update(map[string]string{"old": "secret-old", "new": "secret-new"})
	for _, tc := range []struct {
		name    string
		secrets []string
	}{{"old secret during rotation", []string{"secret-old"}}, {"new secret during rotation", []string{"secret-new"}}, {"both signatures", []string{"secret-old", "secret-new"}}} {
		if code := send(tc.secrets...); code != http.StatusOK {
			t.Errorf("%s: %d, want 200", tc.name, code)
		}
	}
	update(map[string]string{"new": "secret-new"})
	if code := send("secret-old"); code != http.StatusUnauthorized {
		t.Errorf("removed secret on the next request: %d, want 401", code)
	}
	if code := send("secret-new"); code != http.StatusOK {
		t.Errorf("new secret after rotation: %d, want 200", code)
	}
}
