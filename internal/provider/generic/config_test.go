package generic_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// newAdapter is the adapter under test for the job API at apiURL.
func newAdapter(apiURL string) (*generic.Adapter, error) {
	return generic.New(provider.Config{Name: "ns/gen", APIURL: apiURL, Credentials: map[string][]byte{"token": []byte("t")}})
}

func serve(t *testing.T, h http.HandlerFunc) *generic.Adapter {
	t.Helper()
	return providertest.Serve(t, h, newAdapter)
}

func problemAnswer(code int, body string) http.HandlerFunc {
	return providertest.Answer(code, "application/problem+json", body)
}

func TestErrorClasses(t *testing.T) {
	req := provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ref-1", Amount: 100, Currency: "EUR"}
	createJob := func(a *generic.Adapter) error { _, err := a.Create(context.Background(), req); return err }
	getJob := func(a *generic.Adapter) error { _, err := a.Get(context.Background(), "job_1"); return err }
	findJob := func(a *generic.Adapter) error {
		_, err := a.FindByMerchantReference(context.Background(), "ref-1")
		return err
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		call    func(*generic.Adapter) error
		class   error
	}{
		{"409 on create with the key in progress is retryable", problemAnswer(409, `{"title":"in progress","jobId":"job_1"}`), createJob, provider.ErrRetryable},
		{"409 on create naming its job that says retryable true is retried, not followed", problemAnswer(409, `{"title":"in progress","jobId":"job_1","retryable":true}`), createJob, provider.ErrRetryable},
		// The key's first request may have moved money: looked up, never a verdict (SPEC §12.1).
		{"409 on create that says retryable false is a key conflict", problemAnswer(409, `{"title":"key reused with another body","retryable":false}`), createJob, provider.ErrKeyConflict},
		{"503 on create that says retryable false stays retryable", problemAnswer(503, `{"title":"settlement failed","retryable":false}`), createJob, provider.ErrRetryable},
		{"422 on create is a rejection", problemAnswer(422, `{"title":"invalid amount"}`), createJob, provider.ErrNonRetryable},
		{"401 on create is configuration even when it says retryable", problemAnswer(401, `{"title":"bad token","retryable":true}`), createJob, provider.ErrProviderConfig},
		{"403 on get is configuration", problemAnswer(403, `{"title":"forbidden"}`), getJob, provider.ErrProviderConfig},
		{"404 on one job is not found", problemAnswer(404, `{"title":"Job not found","jobId":"job_1"}`), getJob, provider.ErrNotFound},
		{"404 on the jobs search is configuration", problemAnswer(404, `{"title":"no such route"}`), findJob, provider.ErrProviderConfig},
		{"redirect on create is configuration", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.invalid/jobs", http.StatusPermanentRedirect)
		}, createJob, provider.ErrProviderConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providertest.AssertClass(t, tt.call(serve(t, tt.handler)), tt.class)
		})
	}
}
