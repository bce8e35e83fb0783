package generic_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paywarden/paywarden/internal/provider/generic"
)

// The Standard Webhooks specification serializes keys with a
// prefix "for easy identification ... to ensure keys are used as expected":
// whsec_ for a symmetric HMAC secret, whsk_ for an ed25519 secret key and
// whpk_ for an ed25519 PUBLIC key ("Consumers can use whpk_ to verify the
// signature"; asymmetric signatures are sent as "v1a,<base64>"). A consumer of
// an asymmetric sender is handed the whpk_ key, and the generic provider's
// signing Secret is where it goes.
//
// paywarden refuses such a key as a signing secret, as the official library
// does (NewWebhook("whpk_...") fails): CheckSecret reports it (the provider is
// not Ready), and Verify never takes it as an HMAC key, so a forged event
// HMAC-signed with the public key's text is refused.

// publicKey is an ed25519 public key serialized as the specification says.
func publicKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return "whpk_" + base64.StdEncoding.EncodeToString(pub)
}

func TestAPublicKeyIsNotASigningSecret(t *testing.T) {
	whpk := publicKey(t)
	if _, err := standardwebhooks.NewWebhook(whpk); err == nil {
		t.Fatal("precondition: the Standard Webhooks library accepts a whpk_ public key as a webhook secret")
	}
	if err := generic.CheckSecret([]byte(whpk)); err == nil {
		t.Errorf("CheckSecret accepts a whpk_ ed25519 public key as a symmetric signing secret: the provider is Ready and anyone holding the public key can sign")
	}
}

func TestAForgeryHMACedWithThePublicKeyIsRefused(t *testing.T) {
	whpk := publicKey(t)
	ts := time.Now()
	id := "msg_forged_1"
	forged := []byte(`{"id":"evt_forged_1","type":"job.succeeded","timestamp":"` + ts.UTC().Format(time.RFC3339) + `","data":{"jobId":"job_1","correlationId":"order-1","jobStatus":"succeeded","amount":{"value":100000,"currency":"USD"}}}`)

	// The attacker signs with the third-party library, using the public key's
	// text as the HMAC key.
	attacker, err := standardwebhooks.NewWebhookRaw([]byte(whpk))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := attacker.Sign(id, ts, forged)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(generic.HeaderWebhookID, id)
	h.Set(generic.HeaderWebhookTS, strconv.FormatInt(ts.Unix(), 10))
	h.Set(generic.HeaderWebhookSig, sig)

	if err := generic.Verify(h, forged, [][]byte{[]byte(whpk)}, 5*time.Minute, ts); err == nil {
		t.Fatalf("a webhook HMAC-signed with the configured whpk_ PUBLIC key verifies: a forged job.succeeded is accepted")
	}
}

// TestAnEd25519SecretKeyIsNotASigningSecretEither: whsk_ (the sender's
// ed25519 signing key) is refused like whpk_, with surrounding whitespace as
// a Secret file leaves it; a whsec_ secret and a plain one still work.
func TestAnEd25519SecretKeyIsNotASigningSecretEither(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"whsk_" + base64.StdEncoding.EncodeToString(priv), " whpk_AAAA\n"} {
		if err := generic.CheckSecret([]byte(s)); err == nil {
			t.Errorf("CheckSecret accepts %.8q… as a signing secret", s)
		}
	}
	for _, s := range []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("a key")), "plain-shared-secret"} {
		if err := generic.CheckSecret([]byte(s)); err != nil {
			t.Errorf("CheckSecret refuses %q: %v", s, err)
		}
	}
}
