package generic

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// SecretPrefix marks a Standard Webhooks secret serialized as base64.
const SecretPrefix = "whsec_"

// asymmetricKeyPrefixes mark Standard Webhooks ed25519 keys ("whpk_" public,
// "whsk_" secret): keys for "v1a" signatures, never HMAC secrets. A public key
// used as an HMAC secret would let anyone who holds it (anyone: it is public)
// sign events that verify.
var asymmetricKeyPrefixes = [][]byte{[]byte("whpk_"), []byte("whsk_")}

// DecodeSecret returns the HMAC key SignHeaders signs with for a configured
// secret: "whsec_<base64>" is base64-decoded (surrounding whitespace, as left by
// editors and `echo`, is trimmed); an ed25519 key ("whpk_", "whsk_") is
// refused, as the Standard Webhooks libraries refuse it; anything else is used
// as raw bytes, for providers that hand out plain secrets. Verify accepts more
// for an unprefixed secret (VerificationKeys).
func DecodeSecret(s []byte) ([]byte, error) {
	t := bytes.TrimSpace(s)
	for _, p := range asymmetricKeyPrefixes {
		if bytes.HasPrefix(t, p) {
			return nil, errors.New(string(p) + " is an ed25519 key for v1a signatures, not a signing secret: paywarden verifies v1 (HMAC-SHA256) signatures with the endpoint's whsec_ secret")
		}
	}
	if !bytes.HasPrefix(t, []byte(SecretPrefix)) {
		return s, nil
	}
	k, ok := decodeBase64(string(t[len(SecretPrefix):]))
	if !ok {
		return nil, errors.New("whsec_ secret is not valid base64")
	}
	return k, nil
}

// VerificationKeys returns every HMAC key a configured secret stands for:
// DecodeSecret's key and, for a secret without the whsec_ prefix whose value
// (whitespace trimmed) is base64, its decoded bytes too. The official
// libraries read a secret as base64 with or without the prefix (Go:
// NewWebhook(base64Secret); "whsec_" + s and s are one key), so a merchant who
// copies the bare base64 string into the Secret must not see every genuine
// webhook rejected; paywarden has always read an unprefixed secret as raw
// bytes, for providers that hand out plain secrets, and still does. Trying
// both costs one more HMAC per such secret and gives a forger nothing: each
// key is derived from the secret alone.
func VerificationKeys(s []byte) ([][]byte, error) {
	k, err := DecodeSecret(s)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{k}
	if t := bytes.TrimSpace(s); !bytes.HasPrefix(t, []byte(SecretPrefix)) {
		if d, ok := decodeBase64(string(t)); ok && !bytes.Equal(d, k) {
			keys = append(keys, d)
		}
	}
	return keys, nil
}

// decodeBase64 decodes standard base64, padded or with its padding missing or
// cut short; ok is false for anything else and for an empty key.
func decodeBase64(enc string) ([]byte, bool) {
	if k, err := base64.StdEncoding.DecodeString(enc); err == nil && len(k) > 0 {
		return k, true
	}
	k, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(enc, "="))
	return k, err == nil && len(k) > 0
}

// Sign returns base64(HMAC-SHA256(key, "<id>.<ts>.<body>")) for a decoded key.
func Sign(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignHeaders returns the three Standard Webhooks headers for body, with one v1
// signature per configured secret (two during a rotation).
func SignHeaders(id string, t time.Time, body []byte, secrets ...[]byte) (http.Header, error) {
	ts := t.Unix()
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		k, err := DecodeSecret(s)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, "v1,"+Sign(k, id, ts, body))
	}
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTS, strconv.FormatInt(ts, 10))
	h.Set(HeaderWebhookSig, strings.Join(sigs, " "))
	return h, nil
}

const maxSignatureHeader = 4096

// ParseSignatureHeader returns the v1 signatures of a webhook-signature header: a
// list of "<version>,<base64>" entries delimited by spaces (U+0020 only, as the spec
// and the official library have it: a tab or a no-break space is part of an entry).
// Other versions (v1a, v2, ...) are ignored so the sender can add schemes without
// breaking receivers, and so is an entry that is not "<version>,<signature>": the
// library tries every entry until one matches, so one entry it cannot read does not
// sink a valid signature beside it. The header is malformed only when no entry is.
func ParseSignatureHeader(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, provider.SignatureError(provider.ErrMissingHeader, HeaderWebhookSig)
	}
	if len(v) > maxSignatureHeader {
		return nil, provider.SignatureError(provider.ErrMalformedHeader, "header too long")
	}
	var sigs []string
	versioned := false
	for _, tok := range strings.Split(v, " ") {
		ver, sig, ok := strings.Cut(tok, ",")
		if !ok || ver == "" {
			continue
		}
		versioned = true
		if ver == "v1" && sig != "" {
			sigs = append(sigs, sig)
		}
	}
	if !versioned {
		return nil, provider.SignatureError(provider.ErrMalformedHeader, "no entry with a version")
	}
	return sigs, nil
}

// ParseTimestamp parses webhook-timestamp (integer unix seconds). Nothing is trimmed:
// net/http has already removed the spaces and tabs HTTP allows around a value, and
// the official library refuses anything else around the digits.
func ParseTimestamp(v string) (int64, error) {
	if v == "" {
		return 0, provider.SignatureError(provider.ErrMissingHeader, HeaderWebhookTS)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || v[0] == '+' {
		return 0, provider.SignatureError(provider.ErrMalformedHeader, HeaderWebhookTS+" is not a unix timestamp")
	}
	return n, nil
}

// Verify checks a Standard Webhooks request: every v1 signature against every key of
// every secret (VerificationKeys) in constant time, then the timestamp within
// ±tolerance of now. A blank secret is never a key (provider.BlankSecret:
// DecodeSecret would hand it back as raw bytes); like an undecodable one it is
// skipped, so it does not block a rotation.
func Verify(h http.Header, body []byte, secrets [][]byte, tolerance time.Duration, now time.Time) error {
	id := provider.HeaderValue(h, HeaderWebhookID)
	if id == "" {
		return provider.SignatureError(provider.ErrMissingHeader, HeaderWebhookID)
	}
	ts, err := ParseTimestamp(provider.HeaderValue(h, HeaderWebhookTS))
	if err != nil {
		return err
	}
	sigs, err := ParseSignatureHeader(provider.HeaderValue(h, HeaderWebhookSig))
	if err != nil {
		return err
	}
	if len(sigs) == 0 {
		return provider.SignatureError(provider.ErrNoMatchingSignature, "no v1 signature in header")
	}
	matched, usable, blank := false, 0, 0
	for _, s := range secrets {
		if provider.BlankSecret(s) {
			blank++
			continue
		}
		keys, err := VerificationKeys(s)
		if err != nil {
			continue // one bad secret must not block the good one during a rotation
		}
		usable++
		for _, key := range keys {
			want := []byte(Sign(key, id, ts, body))
			for _, got := range sigs {
				if hmac.Equal(want, []byte(got)) {
					matched = true
				}
			}
		}
	}
	if usable == 0 && blank > 0 && blank == len(secrets) {
		return provider.BlankSecrets()
	}
	if usable == 0 {
		return provider.SignatureError(provider.ErrNoMatchingSignature, "no usable secrets configured")
	}
	if !matched {
		return provider.SignatureError(provider.ErrNoMatchingSignature, "")
	}
	if !provider.WithinTolerance(time.Unix(ts, 0), now, tolerance) {
		return provider.SignatureError(provider.ErrTimestampTolerance, HeaderWebhookTS+"="+strconv.FormatInt(ts, 10))
	}
	return nil
}
