package generic_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// opensslVectors were computed with openssl, independently of this package, and are
// hard-coded: a Verify that signs something else than "<id>.<timestamp>.<raw body>"
// with the base64-decoded whsec_ key (another separator or order, the whsec_ secret
// used undecoded, a trimmed body) fails them. Each comment is the exact command; hexkey is
// the decoded secret in hex (printf '%s' '<base64>' | openssl base64 -d | xxd -p).
var opensslVectors = []struct {
	name   string
	secret string // as configured in the signing Secret
	id     string
	ts     int64
	body   string
	sig    string // base64 HMAC-SHA256
}{
	{
		name:   "ASCII JSON body",
		secret: "whsec_cGF5d2FyZGVuIHN0YW5kYXJkIHdlYmhvb2tzIGtleSAx",
		id:     "msg_2mV1kN8aQ",
		ts:     1758456000,
		body:   `{"id":"msg_2mV1kN8aQ","type":"job.succeeded","data":{"jobId":"job_1","amount":{"value":1999,"currency":"USD"}}}`,
		// printf '%s' 'msg_2mV1kN8aQ.1758456000.{"id":"msg_2mV1kN8aQ","type":"job.succeeded","data":{"jobId":"job_1","amount":{"value":1999,"currency":"USD"}}}' | openssl dgst -sha256 -mac HMAC -macopt hexkey:70617977617264656e207374616e6461726420776562686f6f6b73206b65792031 -binary | openssl base64
		sig: "6pIda1tmZHvqJqhzlrDznsygdGNJV+Vd17yRIkfUzmU=",
	},
	{
		name:   "body with non-ASCII UTF-8",
		secret: "whsec_c2Vjb25kIGtleTogMzIgYnl0ZXMgb2YgZW50cm9weSE=",
		id:     "msg_unicode",
		ts:     1790000000,
		body:   `{"id":"msg_unicode","type":"job.failed","data":{"jobId":"job_2","failure":{"message":"Zahlung abgelehnt – カード拒否 ❌"}}}`,
		// printf '%s' 'msg_unicode.1790000000.{"id":"msg_unicode","type":"job.failed","data":{"jobId":"job_2","failure":{"message":"Zahlung abgelehnt – カード拒否 ❌"}}}' | openssl dgst -sha256 -mac HMAC -macopt hexkey:7365636f6e64206b65793a203332206279746573206f6620656e74726f707921 -binary | openssl base64
		sig: "m3z3CVBFhFZCoC2IPzHWkcxUT+X0AxEp3wRkZtnStvo=",
	},
	{
		name:   "body with a trailing newline and a binary key",
		secret: "whsec_nywA4bR9WjjG8BJ+jUuToQ==",
		id:     "msg_nl",
		ts:     1758456789,
		body:   "{\"id\":\"msg_nl\",\"type\":\"job.processing\"}\n",
		// printf '%s\n' 'msg_nl.1758456789.{"id":"msg_nl","type":"job.processing"}' | openssl dgst -sha256 -mac HMAC -macopt hexkey:9f2c00e1b47d5a38c6f0127e8d4b93a1 -binary | openssl base64
		sig: "PBwW+ACiOl5/HaXqafsv11q1eGmNcGK6uttuI3NpLYY=",
	},
}

// undecodedSig is the signature a sender makes that uses a whsec_ secret as it is
// written, without decoding it: a signature the configured key never made.
func undecodedSig(secret, id string, ts int64, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func vectorHeaders(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(generic.HeaderWebhookID, id)
	h.Set(generic.HeaderWebhookTS, strconv.FormatInt(ts, 10))
	h.Set(generic.HeaderWebhookSig, "v1,"+sig)
	return h
}

func TestOpenSSLVectors(t *testing.T) {
	for _, v := range opensslVectors {
		at := time.Unix(v.ts, 0)
		t.Run(v.name+" verifies", func(t *testing.T) {
			if err := generic.Verify(vectorHeaders(v.id, v.ts, v.sig), []byte(v.body), [][]byte{[]byte(v.secret)}, 5*time.Minute, at); err != nil {
				t.Fatal(err)
			}
			// paysim signs with Sign: it must produce exactly what openssl did.
			key, err := generic.DecodeSecret([]byte(v.secret))
			if err != nil {
				t.Fatal(err)
			}
			if got := generic.Sign(key, v.id, v.ts, []byte(v.body)); got != v.sig {
				t.Fatalf("Sign = %s, openssl says %s", got, v.sig)
			}
		})
		t.Run(v.name+" verifies with the secret configured without whsec_", func(t *testing.T) {
			// The official libraries read a bare base64 secret as the
			// whsec_ one (NewWebhook(base64Secret)).
			if err := generic.Verify(vectorHeaders(v.id, v.ts, v.sig), []byte(v.body), [][]byte{[]byte(v.secret[len("whsec_"):])}, 5*time.Minute, at); err != nil {
				t.Fatal(err)
			}
		})
		for _, m := range []struct {
			name   string
			h      http.Header
			body   string
			secret string
		}{
			{"one byte of the body changed", vectorHeaders(v.id, v.ts, v.sig), providertest.Flip(v.body), v.secret},
			{"trailing newline added", vectorHeaders(v.id, v.ts, v.sig), v.body + "\n", v.secret},
			{"one character of the signature changed", vectorHeaders(v.id, v.ts, providertest.Flip(v.sig)), v.body, v.secret},
			{"one byte of webhook-id changed", vectorHeaders(providertest.Flip(v.id), v.ts, v.sig), v.body, v.secret},
			{"timestamp one second off", vectorHeaders(v.id, v.ts+1, v.sig), v.body, v.secret},
			{"signed with the whsec_ string itself as the key", vectorHeaders(v.id, v.ts, undecodedSig(v.secret, v.id, v.ts, v.body)), v.body, v.secret},
		} {
			providertest.ChangeRejected(t, v.name, m.name, generic.Verify(m.h, []byte(m.body), [][]byte{[]byte(m.secret)}, 5*time.Minute, at))
		}
	}
}

// TestToleranceBothDirections moves our clock around a fixed, independently signed
// vector. A timestamp ahead of our clock is as acceptable as one behind it, up to the
// tolerance inclusive: a Verify that rejected every future timestamp fails here.
func TestToleranceBothDirections(t *testing.T) {
	v := opensslVectors[0]
	ts := time.Unix(v.ts, 0)
	providertest.ToleranceBothDirections(t, "timestamp", ts, func(tol time.Duration, now time.Time) error {
		return generic.Verify(vectorHeaders(v.id, v.ts, v.sig), []byte(v.body), [][]byte{[]byte(v.secret)}, tol, now)
	})
}
