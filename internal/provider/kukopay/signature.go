package kukopay

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// ParsedSignature is the content of an X-KukoPay-Signature header.
type ParsedSignature struct {
	Timestamp int64 // t=, unix seconds
	// T is t= as the header carries it (without the spaces around it): the
	// signed string starts with these characters, whatever number they read
	// as ("0<ts>" and "<ts>" are one instant but two signed strings).
	T  string
	V1 []string // every v1= value, in order; more than one during a key rotation
}

// maxSignatureHeader bounds the work spent on a hostile header.
const maxSignatureHeader = 4096

// ParseSignatureHeader parses "t=<unix>,v1=<hex>[,v1=<hex>...]". Fields may come in any
// order and unknown schemes (v0=, v2=) are ignored, so KukoPay can add schemes without
// breaking receivers. Every v1 is kept: collapsing them into a map would keep only the
// last one and break verification during a rotation.
func ParseSignatureHeader(h string) (ParsedSignature, error) {
	var ps ParsedSignature
	if strings.TrimSpace(h) == "" {
		return ps, provider.SignatureError(provider.ErrMissingHeader, HeaderSignature)
	}
	if len(h) > maxSignatureHeader {
		return ps, provider.SignatureError(provider.ErrMalformedHeader, "header too long")
	}
	seenT := false
	for _, item := range strings.Split(h, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return ParsedSignature{}, provider.SignatureError(provider.ErrMalformedHeader, "field without '='")
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "t":
			if seenT {
				// Two timestamps make the signed string ambiguous.
				return ParsedSignature{}, provider.SignatureError(provider.ErrMalformedHeader, "more than one t")
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || v[0] == '+' {
				return ParsedSignature{}, provider.SignatureError(provider.ErrMalformedHeader, "t is not a unix timestamp")
			}
			ps.Timestamp, ps.T, seenT = n, v, true
		case "v1":
			if v != "" {
				ps.V1 = append(ps.V1, v)
			}
		}
	}
	if !seenT {
		return ParsedSignature{}, provider.SignatureError(provider.ErrMalformedHeader, "no t")
	}
	return ps, nil
}

// Sign returns the v1 signature: hex(HMAC-SHA256(secret, "<t>.<raw body>")), t
// written in decimal as SignatureHeaderValue sends it.
func Sign(secret []byte, t int64, body []byte) string {
	return signT(secret, strconv.FormatInt(t, 10), body)
}

// signT is the v1 signature over the header's t exactly as sent: KukoPay signs
// the string "<t>.<raw body>", so a verifier must too, not a t it parsed and
// wrote again (which would accept a signature over other bytes than the
// header's and reject one over the header's own).
func signT(secret []byte, t string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// SignatureHeaderValue builds the header KukoPay sends: one v1 per secret, as during a
// rotation when both the old and the new secret sign.
func SignatureHeaderValue(t time.Time, body []byte, secrets ...[]byte) string {
	ts := t.Unix()
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(ts, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(Sign(s, ts, body))
	}
	return b.String()
}

// Verify checks header against body. Every v1 is compared with every secret in
// constant time, over "<t>.<raw body>" with t as the header carries it; then the
// timestamp t reads as must be within ±tolerance of now (both directions).
// A blank secret is never a key (provider.BlankSecret); beside a real one it is
// skipped, so it does not block a rotation, and with only blank ones nothing verifies.
func Verify(header string, body []byte, secrets [][]byte, tolerance time.Duration, now time.Time) error {
	ps, err := ParseSignatureHeader(header)
	if err != nil {
		return err
	}
	if len(ps.V1) == 0 {
		return provider.SignatureError(provider.ErrNoMatchingSignature, "no v1 signature in header")
	}
	err = provider.MatchSecrets(secrets, func(secret []byte) (bool, error) {
		keys := [][]byte{secret}
		if t := bytes.TrimSpace(secret); len(t) != len(secret) {
			// A Secret written from a file or with echo carries a newline
			// the provider never signed with; the value as written is
			// tried too.
			keys = append(keys, t)
		}
		matched := false
		for _, key := range keys {
			want := []byte(signT(key, ps.T, body))
			for _, got := range ps.V1 {
				// Lowercase so an upper-case hex sender still matches; hmac.Equal keeps the
				// comparison constant-time.
				if hmac.Equal(want, []byte(strings.ToLower(got))) {
					matched = true
				}
			}
		}
		return matched, nil
	})
	if err != nil {
		return err
	}
	if !provider.WithinTolerance(time.Unix(ps.Timestamp, 0), now, tolerance) {
		return provider.SignatureError(provider.ErrTimestampTolerance, "t="+strconv.FormatInt(ps.Timestamp, 10))
	}
	return nil
}
