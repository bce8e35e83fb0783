package providertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Unreachable is an API URL nothing answers at, for an adapter whose test
// makes no request, or wants none answered.
const Unreachable = "http://127.0.0.1:1"

// At is the adapter newAdapter makes for the API at apiURL; the test fails
// when it makes none.
func At[P any](t testing.TB, apiURL string, newAdapter func(apiURL string) (P, error)) P {
	t.Helper()
	a, err := newAdapter(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Serve runs h behind a test server, closed at the end of the test, and
// returns the adapter newAdapter makes for it.
func Serve[P any](t testing.TB, h http.Handler, newAdapter func(apiURL string) (P, error)) P {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return At(t, srv.URL, newAdapter)
}

// Answer answers every request with code and body, of contentType, and the
// header pairs ("Retry-After", "2").
func Answer(code int, contentType, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

// Keys makes idempotency keys no other Next of it made.
type Keys struct{ n atomic.Int64 }

// Next is a fresh key: prefix, a dash and a number.
func (k *Keys) Next(prefix string) string { return fmt.Sprint(prefix, "-", k.n.Add(1)) }
