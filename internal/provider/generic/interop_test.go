package generic_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// The official Standard Webhooks Go library is the reference for the scheme: what
// it signs verifies here, what paywarden signs (paysim) verifies there, and a
// hostile variant of a request it signed is judged here exactly as its Verify
// judges it, except where a row names why paywarden rejects by design.

var (
	interopKey    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard webhooks interop key, 32B"))
	interopOldKey = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the key before the rotation, 32B"))
	interopOther  = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a key nobody configured here, 32"))
	interopRaw    = "plain-secret-from-a-provider"
	// interopBare is a secret as the library's README spells it
	// (NewWebhook(base64Secret)): base64, without the whsec_ prefix.
	interopBare = base64.StdEncoding.EncodeToString([]byte("a 32-byte key the provider handed"))
	interopBody = `{"id":"msg_2mV1kN8aQ","type":"job.failed","data":{"jobId":"job_2","failure":{"message":"Zahlung abgelehnt – カード拒否 ❌ café"}}}`
)

// libTolerance is the library's tolerance: a package variable it does not let
// callers change.
const libTolerance = 5 * time.Minute

// libraryWebhook loads a secret as paysim signs with it (generic.DecodeSecret):
// whsec_<base64> with the library's NewWebhook, anything else as raw bytes with
// NewWebhookRaw (providers that hand out plain secrets).
func libraryWebhook(secret string) (*standardwebhooks.Webhook, error) {
	if strings.HasPrefix(secret, generic.SecretPrefix) {
		return standardwebhooks.NewWebhook(secret)
	}
	return standardwebhooks.NewWebhookRaw([]byte(secret))
}

// libraryReadings are the library's webhooks for every reading paywarden gives a
// secret (generic.VerificationKeys): the library's own (NewWebhook base64-decodes
// a secret with or without the whsec_ prefix) and, for an unprefixed one, its
// bytes as they are (NewWebhookRaw). A reading the library cannot load is left
// out.
func libraryReadings(secret string) []*standardwebhooks.Webhook {
	var out []*standardwebhooks.Webhook
	if wh, err := standardwebhooks.NewWebhook(secret); err == nil {
		out = append(out, wh)
	}
	if !strings.HasPrefix(secret, generic.SecretPrefix) {
		if wh, err := standardwebhooks.NewWebhookRaw([]byte(secret)); err == nil {
			out = append(out, wh)
		}
	}
	return out
}

// librarySign is the library's webhook-signature entry ("v1,<base64>") for body
// signed with secret as webhook-id id at ts.
func librarySign(t *testing.T, secret, id string, ts int64, body string) string {
	t.Helper()
	wh, err := libraryWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return signWith(t, wh, id, ts, body)
}

func signWith(t *testing.T, wh *standardwebhooks.Webhook, id string, ts int64, body string) string {
	t.Helper()
	s, err := wh.Sign(id, time.Unix(ts, 0), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// libraryVerify is the library's verdict with every configured secret active:
// any secret, in any of its readings, may match; a secret the library cannot
// load is skipped, as paywarden skips a secret it cannot decode.
func libraryVerify(secrets []string, body []byte, h http.Header) error {
	err := standardwebhooks.ErrNoMatchingSignature
	for _, s := range secrets {
		for _, wh := range libraryReadings(s) {
			if err = wh.Verify(body, h); err == nil {
				return nil
			}
		}
	}
	return err
}

func asBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestLibrarySignatureInterop: a signature the library makes is the one Sign
// makes, and headers paysim sends (SignHeaders, one signature per secret during a
// rotation) verify with the library for each secret.
func TestLibrarySignatureInterop(t *testing.T) {
	ts := time.Now()
	for _, secret := range []string{interopKey, interopRaw} {
		key, err := generic.DecodeSecret([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := "v1,"+generic.Sign(key, "msg_1", ts.Unix(), []byte(interopBody)), librarySign(t, secret, "msg_1", ts.Unix(), interopBody); got != want {
			t.Errorf("%s: Sign = %s, the library signs %s", secret, got, want)
		}
	}
	h, err := generic.SignHeaders("msg_1", ts, []byte(interopBody), []byte(interopOldKey), []byte(interopKey), []byte(interopRaw))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{interopOldKey, interopKey, interopRaw} {
		if err := libraryVerify([]string{secret}, []byte(interopBody), h); err != nil {
			t.Errorf("the library rejects SignHeaders for %s: %v", secret, err)
		}
	}
}

// TestLibraryDifferential: hostile variants of a request the library signed, each
// judged by the library and by paywarden.
func TestLibraryDifferential(t *testing.T) {
	const id = "msg_2mV1kN8aQ"
	n := time.Now().Unix()
	sign := func(secret string, ts int64, body string) string { return librarySign(t, secret, id, ts, body) }
	good := sign(interopKey, n, interopBody)
	bare := strings.TrimPrefix(good, "v1,")
	bad, bad2 := sign(interopOther, n, interopBody), sign(interopKey, n, interopBody+" ")
	at := func(ts, sigHeader string) http.Header {
		h := http.Header{}
		h.Set(generic.HeaderWebhookID, id)
		h.Set(generic.HeaderWebhookTS, ts)
		h.Set(generic.HeaderWebhookSig, sigHeader)
		return h
	}
	now := func(sigHeader string) http.Header { return at(strconv.FormatInt(n, 10), sigHeader) }
	signedAt := func(ts int64) http.Header { return at(strconv.FormatInt(ts, 10), sign(interopKey, ts, interopBody)) }
	without := func(name string) http.Header { h := now(good); h.Del(name); return h }
	key := []string{interopKey}
	rawKey, err := standardwebhooks.NewWebhookRaw([]byte(interopKey))
	if err != nil {
		t.Fatal(err)
	}
	asRaw, err := rawKey.Sign(id, time.Unix(n, 0), []byte(interopBody))
	if err != nil {
		t.Fatal(err)
	}
	// The library's reading of a bare base64 secret: the key it encodes, the
	// same key as with the whsec_ prefix.
	bareKey, err := standardwebhooks.NewWebhook(interopBare)
	if err != nil {
		t.Fatal(err)
	}
	bareSigned := signWith(t, bareKey, id, n, interopBody)
	if prefixed, err := standardwebhooks.NewWebhook(generic.SecretPrefix + interopBare); err != nil || signWith(t, prefixed, id, n, interopBody) != bareSigned {
		t.Fatalf("the library reads %s and whsec_%[1]s as different keys (%v)", interopBare, err)
	}
	pad := strings.Repeat("v1a,"+strings.Repeat("A", 60)+" ", 60) // 65 bytes an entry
	tests := []struct {
		name    string
		h       http.Header
		body    string
		secrets []string
		want    bool   // the library's verdict
		rejects string // why paywarden rejects by design what the library accepts
	}{
		{name: "one v1 signature", h: now(good), want: true},
		{name: "several signatures, the valid one last", h: now(bad + " " + bad2 + " " + good), want: true},
		{name: "several signatures, the valid one first", h: now(good + " " + bad + " " + bad2), want: true},
		{name: "the valid signature under v1a", h: now("v1a," + bare)},
		{name: "the valid signature under v2", h: now("v2," + bare)},
		{name: "the valid signature under V1", h: now("V1," + bare)},
		{name: "the valid signature without a version", h: now(bare)},
		{name: "the valid signature under v2 beside a wrong v1", h: now(bad + " v2," + bare)},
		{name: "the valid signature with trailing data", h: now(good + ",extra")},
		{name: "the valid signature without its base64 padding", h: now(strings.TrimRight(good, "="))},
		{name: "extra spaces between and around entries", h: now("  " + bad + "   " + good + "  "), want: true},
		{name: "a space after the comma", h: now("v1, " + bare)},
		{name: "a token without a comma before the valid signature", h: now("v1 " + good), want: true},
		{name: "malformed entries before the valid signature", h: now(",,, v1,not,base64  " + good), want: true},
		{name: "entries delimited by a tab", h: now(bad + "\t" + good)},
		{name: "entries delimited by a no-break space", h: now(bad + "\u00a0" + good)},
		{name: "the valid signature in a second webhook-signature line", h: func() http.Header { h := now(bad); h.Add(generic.HeaderWebhookSig, good); return h }()},

		{name: "one byte of the body flipped", h: now(good), body: providertest.Flip(interopBody)},
		{name: "a newline appended to the body", h: now(good), body: interopBody + "\n"},
		{name: "the body's é decomposed (NFD)", h: now(good), body: strings.Replace(interopBody, "é", "e\u0301", 1)},
		{name: "a unicode body with a unicode webhook-id", h: func() http.Header {
			h := now(librarySign(t, interopKey, "msg_ü_カ", n, interopBody))
			h.Set(generic.HeaderWebhookID, "msg_ü_カ")
			return h
		}(), want: true},
		{name: "webhook-id changed", h: func() http.Header { h := now(good); h.Set(generic.HeaderWebhookID, id+"x"); return h }()},

		{name: "webhook-timestamp one second later than signed", h: at(strconv.FormatInt(n+1, 10), good)},
		{name: "webhook-timestamp with leading zeros", h: at("00"+strconv.FormatInt(n, 10), good), want: true},
		{name: "webhook-timestamp with a leading space", h: at(" "+strconv.FormatInt(n, 10), good)},
		{name: "webhook-timestamp with a trailing no-break space", h: at(strconv.FormatInt(n, 10)+"\u00a0", good)},
		{name: "webhook-timestamp in milliseconds", h: at(strconv.FormatInt(n*1000, 10), good)},
		{name: "webhook-timestamp with a fraction", h: at(strconv.FormatInt(n, 10)+".0", good)},
		{name: "webhook-timestamp with a plus sign", h: at("+"+strconv.FormatInt(n, 10), good), want: true,
			rejects: "the spec's header is an integer unix timestamp and the signed string has no sign: no sender writes one"},

		{name: "timestamp tolerance+1s in the past", h: signedAt(n - 301)},
		{name: "timestamp the tolerance in the past, plus the part of the second gone by", h: signedAt(n - 300)},
		// The cases inside the window keep 10 s from its edge, those past it
		// 10 s beyond: the library reads the clock itself, and a loaded
		// machine may spend seconds between n and its check.
		{name: "timestamp tolerance-10s in the past", h: signedAt(n - 290), want: true},
		{name: "timestamp tolerance-10s in the future", h: signedAt(n + 290), want: true},
		{name: "timestamp exactly the tolerance in the future", h: signedAt(n + 300), want: true},
		{name: "timestamp tolerance+10s in the future", h: signedAt(n + 310)},

		{name: "rotation: signed with the old key, both keys configured", h: now(sign(interopOldKey, n, interopBody)), secrets: []string{interopOldKey, interopKey}, want: true},
		{name: "rotation: signed with both keys, the new one configured", h: now(sign(interopOldKey, n, interopBody) + " " + good), want: true},
		{name: "rotation: signed with the old key, the new one configured", h: now(sign(interopOldKey, n, interopBody))},
		{name: "a raw secret", h: now(sign(interopRaw, n, interopBody)), secrets: []string{interopRaw}, want: true},
		{name: "the sender used the whsec_ string as a raw key", h: now(asRaw)},
		{name: "a bare base64 secret, signed with the key it encodes (the library's reading)", h: now(bareSigned), secrets: []string{interopBare}, want: true},
		{name: "a bare base64 secret, signed with its bytes as they are (paywarden's raw reading)", h: now(sign(interopBare, n, interopBody)), secrets: []string{interopBare}, want: true},
		{name: "a bare base64 secret, configured with the whsec_ prefix", h: now(bareSigned), secrets: []string{generic.SecretPrefix + interopBare}, want: true},
		{name: "a whsec_ secret, signed with the bare string as a raw key", h: now(sign(interopBare, n, interopBody)), secrets: []string{generic.SecretPrefix + interopBare}},
		{name: "a raw secret that is not base64, signed with a key it does not encode", h: now(bareSigned), secrets: []string{interopRaw}},
		{name: "a whsec_ secret that is not base64 beside the valid one", h: now(good), secrets: []string{"whsec_!!!", interopKey}, want: true},
		{name: "no secrets configured", h: now(good), secrets: []string{}},

		{name: "webhook-id missing", h: without(generic.HeaderWebhookID)},
		{name: "webhook-timestamp missing", h: without(generic.HeaderWebhookTS)},
		{name: "webhook-signature missing", h: without(generic.HeaderWebhookSig)},
		{name: "webhook-timestamp empty", h: at("", good)},
		{name: "webhook-signature blank", h: now("   ")},
		{name: "webhook-signature a bare v1,", h: now("v1,")},

		{name: "a 3.9 KB header, the valid signature last", h: now(pad + good), want: true},
		{name: "a 4.4 KB header, the valid signature last", h: now(pad + pad[:520] + good), want: true,
			rejects: "the header is bounded (4096 bytes) before any HMAC; the spec sets no limit and a sender rotating keys sends two or three entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, secrets := interopBody, key
			if tt.body != "" {
				body = tt.body
			}
			if tt.secrets != nil {
				secrets = tt.secrets
			}
			library := func() error { return libraryVerify(secrets, []byte(body), tt.h) }
			verify := func(now time.Time) error {
				return generic.Verify(tt.h, []byte(body), asBytes(secrets), libTolerance, now)
			}
			providertest.SameVerdict(t, library, verify, tt.want, tt.rejects)
		})
	}
}
