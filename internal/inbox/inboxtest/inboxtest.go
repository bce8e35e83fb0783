// Package inboxtest is what the receiver's suites knew as their fixtures, now
// a thin layer over internal/fixture, where every envtest suite gets its
// fixtures. It keeps the receiver suites' defaults (a signing Secret on every
// provider, per-type test credentials); new code uses internal/fixture.
package inboxtest

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// Timeout is the default deadline of Eventually.
const Timeout = fixture.Timeout

// BundleNamespace is where the receivers read the webhook verification
// bundles (fixture.BundleNamespace).
const BundleNamespace = fixture.BundleNamespace

// Types of internal/fixture under the names the receiver suites use.
type (
	KukoPayEvent    = fixture.KukoPayEvent
	GenericEvent    = fixture.GenericEvent
	Response        = fixture.Response
	Receiver        = fixture.Receiver
	ReceiverOptions = fixture.ReceiverOptions
)

// Functions of internal/fixture under the names the receiver suites use.
var (
	KukoPayHeader = fixture.KukoPayHeader
	GenericHeader = fixture.GenericHeader
	Send          = fixture.Send
	Namespace     = fixture.Namespace
	GetPayment    = fixture.GetPayment
	Events        = fixture.WebhookEvents
	EventFor      = fixture.WebhookEventFor
	Transitions   = fixture.Transitions
	WaitCached    = fixture.WaitCached
	// WaitBundleSecrets waits for a rotation to reach a receiver's cache.
	WaitBundleSecrets = fixture.WaitBundleSecrets
)

// Eventually is fixture.Eventually with a describing condition.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	fixture.Eventually(t, timeout, "the condition", cond)
}

// StartReceiver is fixture.NewReceiver: a receiver with the webhook-bundle
// controller beside it.
func StartReceiver(cfg *rest.Config, scheme *runtime.Scheme, ro ReceiverOptions) (*Receiver, error) {
	return fixture.NewReceiver(cfg, scheme, ro)
}

// Provider describes a PaymentProvider fixture.
type Provider struct {
	Namespace, Name string
	Type            v1alpha1.ProviderType
	APIURL          string
	// Credentials of the credentials Secret; default per type.
	Credentials map[string]string
	// SigningSecrets are the keys of the signing Secret; each is an active secret.
	SigningSecrets map[string]string
	MaxBodyBytes   int64
	Retention      time.Duration
}

// CreateProvider creates the provider with its credentials Secret and its
// signing Secret (always, keys or not).
func CreateProvider(t testing.TB, c client.Client, p Provider) *v1alpha1.PaymentProvider {
	t.Helper()
	if p.APIURL == "" {
		p.APIURL = "http://provider.invalid"
	}
	if p.Credentials == nil {
		p.Credentials = map[string]string{kukopay.CredentialAPIKey: "test-key"}
		if p.Type == v1alpha1.ProviderGeneric {
			p.Credentials = map[string]string{generic.CredentialToken: "test-token"}
		}
	}
	if p.SigningSecrets == nil {
		p.SigningSecrets = map[string]string{}
	}
	return fixture.CreateProvider(t, c, fixture.Provider{
		Namespace: p.Namespace, Name: p.Name, Type: p.Type, APIURL: p.APIURL, Credentials: p.Credentials,
		SigningSecrets: p.SigningSecrets, MaxBodyBytes: p.MaxBodyBytes, Retention: p.Retention,
	})
}

// CreatePayment creates a tracked Payment (spec.providerPaymentID set, so no
// reconciler is needed) with an explicit merchant reference.
func CreatePayment(t testing.TB, c client.Client, ns, name, providerName, merchantRef, providerID string, amount int64, currency string) *v1alpha1.Payment {
	t.Helper()
	return fixture.CreatePayment(t, c, fixture.Payment{
		Namespace: ns, Name: name, Provider: providerName, MerchantReference: merchantRef,
		ProviderPaymentID: providerID, Amount: amount, Currency: currency,
	})
}

// WaitResult waits until the WebhookEvent of (provider, event id) records a
// result other than Pending, and returns it. The receiver acknowledges an
// event once it is stored and applied; the result on the record follows.
func WaitResult(t testing.TB, c client.Reader, ns, providerName, eventID string) *v1alpha1.WebhookEvent {
	t.Helper()
	return fixture.WaitEventResult(t, c, ns, providerName, eventID, "", 10*time.Second)
}
