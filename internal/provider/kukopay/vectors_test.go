package kukopay_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// opensslVectors were computed with openssl, independently of this package, and are
// hard-coded: a Verify that signs something else than "<t>.<raw body>" (another
// separator, another order, a trimmed body) fails them, whereas signatures made with
// kukopay.Sign would agree with any such change. Each comment is the exact command.
var opensslVectors = []struct {
	name   string
	secret string
	t      int64
	body   string
	sig    string // hex HMAC-SHA256
}{
	{
		name:   "ASCII JSON body",
		secret: "whk_test_4f1c2a",
		t:      1758456000,
		body:   `{"id":"evt_1","type":"payment.succeeded","data":{"object":{"id":"pay_1","amount":1999,"currency":"USD"}}}`,
		// printf '%s' '1758456000.{"id":"evt_1","type":"payment.succeeded","data":{"object":{"id":"pay_1","amount":1999,"currency":"USD"}}}' | openssl dgst -sha256 -hmac 'whk_test_4f1c2a'
		sig: "5bf2da091a23e92f715248acb9b9a08d0a19cf57af384c0dc7718472e03acbb3",
	},
	{
		name:   "body with non-ASCII UTF-8",
		secret: "kuko-rotation-2026",
		t:      1790000000,
		body:   `{"id":"evt_2","type":"payment.failed","data":{"object":{"id":"pay_2","description":"Café crème – 東京 💳"}}}`,
		// printf '%s' '1790000000.{"id":"evt_2","type":"payment.failed","data":{"object":{"id":"pay_2","description":"Café crème – 東京 💳"}}}' | openssl dgst -sha256 -hmac 'kuko-rotation-2026'
		sig: "3dfed640b47fbd0de00cdaff165a9ffcfe14bf2364c96888d585c511802cbfd3",
	},
	{
		name:   "body with a trailing newline",
		secret: "s3cr3t",
		t:      1758456789,
		body:   "{\"id\":\"evt_3\",\"type\":\"refund.succeeded\"}\n",
		// printf '%s\n' '1758456789.{"id":"evt_3","type":"refund.succeeded"}' | openssl dgst -sha256 -hmac 's3cr3t'
		sig: "46aadff8fd647372834bb758f7308dc8d743066a6313b148d226077cb290310f",
	},
}

func vectorHeader(t int64, sig string) string {
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + sig
}

func TestOpenSSLVectors(t *testing.T) {
	for _, v := range opensslVectors {
		secrets := [][]byte{[]byte(v.secret)}
		at := time.Unix(v.t, 0)
		t.Run(v.name+" verifies", func(t *testing.T) {
			if err := kukopay.Verify(vectorHeader(v.t, v.sig), []byte(v.body), secrets, 5*time.Minute, at); err != nil {
				t.Fatal(err)
			}
			// paysim signs with Sign: it must produce exactly what openssl did.
			if got := kukopay.Sign([]byte(v.secret), v.t, []byte(v.body)); got != v.sig {
				t.Fatalf("Sign = %s, openssl says %s", got, v.sig)
			}
		})
		for _, m := range []struct {
			name, header, body, secret string
		}{
			{"one byte of the body changed", vectorHeader(v.t, v.sig), providertest.Flip(v.body), v.secret},
			{"trailing newline added", vectorHeader(v.t, v.sig), v.body + "\n", v.secret},
			{"one hex digit of the signature changed", vectorHeader(v.t, providertest.Flip(v.sig)), v.body, v.secret},
			{"timestamp one second off", vectorHeader(v.t+1, v.sig), v.body, v.secret},
			{"one byte of the secret changed", vectorHeader(v.t, v.sig), v.body, providertest.Flip(v.secret)},
		} {
			providertest.ChangeRejected(t, v.name, m.name, kukopay.Verify(m.header, []byte(m.body), [][]byte{[]byte(m.secret)}, 5*time.Minute, at))
		}
	}
}

// TestToleranceBothDirections moves our clock around a fixed, independently signed
// vector. A timestamp ahead of our clock is as acceptable as one behind it, up to the
// tolerance inclusive: a Verify that rejected every future timestamp fails here.
func TestToleranceBothDirections(t *testing.T) {
	v := opensslVectors[0]
	ts := time.Unix(v.t, 0)
	providertest.ToleranceBothDirections(t, "timestamp", ts, func(tol time.Duration, now time.Time) error {
		return kukopay.Verify(vectorHeader(v.t, v.sig), []byte(v.body), [][]byte{[]byte(v.secret)}, tol, now)
	})
	t.Run("zero tolerance means the 5 minute default", func(t *testing.T) {
		if err := kukopay.Verify(vectorHeader(v.t, v.sig), []byte(v.body), [][]byte{[]byte(v.secret)}, 0, ts.Add(-5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := kukopay.Verify(vectorHeader(v.t, v.sig), []byte(v.body), [][]byte{[]byte(v.secret)}, 0, ts.Add(-5*time.Minute-time.Second)); !errors.Is(err, provider.ErrTimestampTolerance) {
			t.Fatalf("err = %v", err)
		}
	})
}
