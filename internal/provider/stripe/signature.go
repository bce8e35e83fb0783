package stripe

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/paywarden/paywarden/internal/provider"
)

// HeaderSignature is the header Stripe signs webhooks in:
// "t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>[,v1=...]", one v1 per
// active endpoint secret while a secret is being rolled.
const HeaderSignature = "Stripe-Signature"

// SchemeStripeSignature is what VerifyWebhook returns.
const SchemeStripeSignature = "stripe-signature"

// maxSignatureHeader bounds the work spent on a hostile header.
const maxSignatureHeader = 4096

// Verify checks a Stripe-Signature header against the raw body with every active
// secret (any secret, any v1 may match), then the timestamp against now in both
// directions. The signature itself is checked by stripe-go's webhook package;
// stripe-go cannot be told the time (it checks against the wall clock) and only
// rejects timestamps that are too old, so the tolerance is checked here with
// provider.WithinTolerance: a timestamp from the future is as suspicious as an old
// one. A secret is trimmed (a Secret file's trailing newline); a blank one is never a
// key (provider.BlankSecret) and, beside a real one, does not block it.
func Verify(header string, body []byte, secrets [][]byte, tolerance time.Duration, now time.Time) error {
	if strings.TrimSpace(header) == "" {
		return provider.SignatureError(provider.ErrMissingHeader, HeaderSignature)
	}
	if len(header) > maxSignatureHeader {
		return provider.SignatureError(provider.ErrMalformedHeader, "header too long")
	}
	ts, err := signatureTimestamp(header)
	if err != nil {
		return err
	}
	err = provider.MatchSecrets(secrets, func(secret []byte) (bool, error) {
		s := strings.TrimSpace(string(secret))
		if CheckSecret(secret) != nil {
			return false, nil // an API key is never a signing key (CheckSecret)
		}
		switch err := webhook.ValidatePayloadIgnoringTolerance(body, header, s); {
		case err == nil:
			return true, nil
		case errors.Is(err, webhook.ErrInvalidHeader):
			return false, provider.SignatureError(provider.ErrMalformedHeader, err.Error())
		case errors.Is(err, webhook.ErrNotSigned):
			return false, provider.SignatureError(provider.ErrMissingHeader, HeaderSignature)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if !provider.WithinTolerance(time.Unix(ts, 0), now, tolerance) {
		return provider.SignatureError(provider.ErrTimestampTolerance, "t="+strconv.FormatInt(ts, 10))
	}
	return nil
}

// apiKeyPrefixes start Stripe's API keys: publishable, secret and restricted
// (Stripe API reference, "API keys"). A webhook endpoint's signing secret is
// whsec_….
var apiKeyPrefixes = []string{"pk_", "sk_", "rk_"}

// CheckSecret refuses a Stripe API key put where the endpoint's signing secret
// belongs: a publishable key is public (every checkout page carries it), so as
// an HMAC key it would let anyone sign events that verify; a secret key would
// verify nothing and leak into the signing Secret. Verify never uses one.
func CheckSecret(secret []byte) error {
	s := strings.TrimSpace(string(secret))
	for _, p := range apiKeyPrefixes {
		if strings.HasPrefix(s, p) {
			return fmt.Errorf("a Stripe API key (%s…) is not a webhook signing secret: use the endpoint's signing secret (whsec_…, Dashboard → Webhooks → the endpoint)", p)
		}
	}
	return nil
}

// signatureTimestamp reads the one t= field of the header. stripe-go parses the header
// too but does not export the timestamp; two t fields are refused because the signed
// string would be ambiguous.
func signatureTimestamp(header string) (int64, error) {
	var ts int64
	seen := false
	for _, item := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k != "t" {
			continue
		}
		if seen {
			return 0, provider.SignatureError(provider.ErrMalformedHeader, "more than one t")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || v == "" || v[0] == '+' {
			return 0, provider.SignatureError(provider.ErrMalformedHeader, "t is not a unix timestamp")
		}
		ts, seen = n, true
	}
	if !seen {
		return 0, provider.SignatureError(provider.ErrMalformedHeader, "no t")
	}
	return ts, nil
}

// SignatureHeaderValue builds the Stripe-Signature header Stripe sends for body at t:
// one v1 per secret, as while an endpoint secret is being rolled. It signs with
// stripe-go's webhook.ComputeSignature; paysim uses it to sign what it delivers.
func SignatureHeaderValue(t time.Time, body []byte, secrets ...[]byte) string {
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(t.Unix(), 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(webhook.ComputeSignature(t, body, string(s))))
	}
	return b.String()
}
