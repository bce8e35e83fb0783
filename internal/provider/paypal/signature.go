package paypal

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// Transmission is the set of PAYPAL-* headers that accompany a webhook.
type Transmission struct {
	ID, Time, Sig, CertURL, AuthAlgo string
	At                               time.Time // Time parsed
}

// maxHeaderLen bounds each header value passed on to the verification API.
const maxHeaderLen = 2048

// ParseTransmissionHeaders extracts the five headers. Every one is required: PayPal's
// API would reject the request anyway, and not calling it saves a round trip on junk.
func ParseTransmissionHeaders(h http.Header) (Transmission, error) {
	t := Transmission{
		ID: provider.HeaderValue(h, HeaderTransmissionID), Time: provider.HeaderValue(h, HeaderTransmissionTime), Sig: provider.HeaderValue(h, HeaderTransmissionSig),
		CertURL: provider.HeaderValue(h, HeaderCertURL), AuthAlgo: provider.HeaderValue(h, HeaderAuthAlgo),
	}
	for _, f := range []struct{ name, v string }{
		{HeaderTransmissionID, t.ID}, {HeaderTransmissionTime, t.Time}, {HeaderTransmissionSig, t.Sig},
		{HeaderCertURL, t.CertURL}, {HeaderAuthAlgo, t.AuthAlgo},
	} {
		if f.v == "" {
			return Transmission{}, provider.SignatureError(provider.ErrMissingHeader, f.name)
		}
		if len(f.v) > maxHeaderLen {
			return Transmission{}, provider.SignatureError(provider.ErrMalformedHeader, f.name+" too long")
		}
	}
	at, err := time.Parse(time.RFC3339, t.Time)
	if err != nil {
		return Transmission{}, provider.SignatureError(provider.ErrMalformedHeader, HeaderTransmissionTime+" is not RFC 3339")
	}
	t.At = at
	return t, nil
}

// checkLocally is what is checked of a request before PayPal is asked: its
// transmission headers, a webhook id to ask about, and a body PayPal could
// have signed.
func (a *Adapter) checkLocally(h http.Header, rawBody []byte) (Transmission, error) {
	t, err := ParseTransmissionHeaders(h)
	if err != nil {
		return Transmission{}, err
	}
	if provider.BlankWebhookID(a.webhookID) {
		// Whitespace is no id PayPal assigns: asking PayPal about it only spends a call.
		return Transmission{}, provider.SignatureError(provider.ErrNoMatchingSignature, "no paypal webhook id configured: it is blank (empty or whitespace only)")
	}
	if !json.Valid(rawBody) {
		return Transmission{}, provider.SignatureError(provider.ErrNoMatchingSignature, "body is not JSON, so PayPal did not sign it")
	}
	return t, nil
}

// VerificationKey implements provider.RemoteVerifier: a SHA-256 over everything
// VerifyWebhook sends PayPal (the webhook id, the five transmission headers, the body),
// so a forgery that reuses a genuine transmission id has a key of its own and cannot
// poison the genuine request's remembered verdict.
//
// A request VerifyWebhook rejects without asking PayPal has no key (the
// error): the receiver then lets the adapter reject it, and spends none of
// the provider's verification budget on it.
func (a *Adapter) VerificationKey(h http.Header, rawBody []byte) (string, time.Time, error) {
	t, err := a.checkLocally(h, rawBody)
	if err != nil {
		return "", time.Time{}, err
	}
	d := sha256.New()
	for _, f := range []string{a.webhookID, t.ID, t.Time, t.Sig, t.CertURL, t.AuthAlgo} {
		// Length-prefixed, so no two field lists hash the same bytes.
		_ = binary.Write(d, binary.BigEndian, uint32(len(f)))
		d.Write([]byte(f))
	}
	d.Write(rawBody)
	return string(d.Sum(nil)), t.At, nil
}

// VerifyWebhook implements provider.Provider by asking PayPal. secrets are not used:
// PayPal signs with its own certificate and the account is identified by the
// configured webhook id. The transmission time is checked against ±tolerance locally
// first, because PayPal's API answers SUCCESS for a replayed request.
func (a *Adapter) VerifyWebhook(ctx context.Context, h http.Header, rawBody []byte, _ [][]byte, tolerance time.Duration, now time.Time) (string, error) {
	t, err := a.checkLocally(h, rawBody)
	if err != nil {
		return provider.SchemePayPal, err
	}
	if !provider.WithinTolerance(t.At, now, tolerance) {
		return provider.SchemePayPal, provider.SignatureError(provider.ErrTimestampTolerance, HeaderTransmissionTime+"="+t.Time)
	}
	body, err := VerifyRequestBody(t, a.webhookID, rawBody)
	if err != nil {
		return provider.SchemePayPal, provider.SignatureError(provider.ErrMalformedHeader, err.Error())
	}
	var out VerifyResponse
	err = a.do(ctx, provider.Request{Op: verifyOp, Method: http.MethodPost, Path: "/v1/notifications/verify-webhook-signature", RawJSON: body}, &out)
	if err != nil {
		var pe *provider.Error
		// PayPal answers 400 when the transmission fields are not even well-formed:
		// that is a forged or mangled request, not an outage. Only the verification
		// call's own answer counts: a 400 from the token endpoint is our credentials
		// problem (ProviderConfig) and must not reject the sender's webhook.
		if errors.As(err, &pe) && pe.Op == verifyOp && (pe.StatusCode == http.StatusBadRequest || pe.StatusCode == http.StatusUnprocessableEntity) {
			return provider.SchemePayPal, fmt.Errorf("%w: %w: %w", provider.ErrInvalidSignature, provider.ErrNoMatchingSignature, err)
		}
		return provider.SchemePayPal, err
	}
	if out.VerificationStatus != VerificationSuccess {
		return provider.SchemePayPal, provider.SignatureError(provider.ErrNoMatchingSignature, "verification_status "+strconv.Quote(out.VerificationStatus))
	}
	return provider.SchemePayPal, nil
}

// verifyOp names the verification call in errors.
const verifyOp = "verify webhook"

// VerifyRequestBody builds the verify-webhook-signature body with rawEvent spliced in
// byte for byte: encoding/json would compact and re-escape a json.RawMessage, and
// PayPal checks the signature against the event as it sent it.
func VerifyRequestBody(t Transmission, webhookID string, rawEvent []byte) ([]byte, error) {
	head, err := json.Marshal(VerifyRequest{
		AuthAlgo: t.AuthAlgo, CertURL: t.CertURL, TransmissionID: t.ID, TransmissionSig: t.Sig, TransmissionTime: t.Time,
		WebhookID: webhookID,
	})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"webhook_event":`)
	b.Write(rawEvent)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// SimAuthAlgo is the PAYPAL-AUTH-ALGO paysim sends. Real PayPal signs with
// SHA256withRSA and a certificate; paysim signs with an HMAC it can check itself in its
// verify-webhook-signature endpoint, and says so instead of pretending to be RSA.
const SimAuthAlgo = "PAYSIMHMACSHA256"

// SignTransmission is paysim's transmission signature: base64(HMAC-SHA256(secret,
// "<transmission id>|<transmission time>|<webhook id>|<crc32 of body>")), the same
// signed string PayPal uses, with an HMAC in place of RSA.
func SignTransmission(secret []byte, transmissionID, transmissionTime, webhookID string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s|%s|%s|%d", transmissionID, transmissionTime, webhookID, crc32.ChecksumIEEE(body))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// CheckTransmission is the check behind paysim's verify-webhook-signature endpoint:
// true when any secret produced req.TransmissionSig for req.WebhookEvent.
func CheckTransmission(req VerifyRequest, secrets [][]byte) bool {
	got, err := base64.StdEncoding.DecodeString(req.TransmissionSig)
	if err != nil {
		return false
	}
	ok := false
	for _, s := range secrets {
		want, _ := base64.StdEncoding.DecodeString(SignTransmission(s, req.TransmissionID, req.TransmissionTime, req.WebhookID, req.WebhookEvent))
		if hmac.Equal(want, got) {
			ok = true
		}
	}
	return ok
}
