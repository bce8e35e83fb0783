package controllers_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// providerObject is a provider whose Secrets the test creates (or not).
func providerObject(ns, name string, typ v1alpha1.ProviderType, credentials string, signing string) *v1alpha1.PaymentProvider {
	p := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: typ, APIURL: "https://api.provider.invalid",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: credentials},
		},
	}
	if signing != "" {
		p.Spec.Webhook.SigningSecretRef = &v1alpha1.SecretReference{Name: signing}
	}
	return p
}

func TestProviderValidation(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerProvider))

	kuko := map[string]string{"apiKey": "sk"}
	cases := []struct {
		name       string
		typ        v1alpha1.ProviderType
		secrets    map[string]map[string]string // created before the provider
		signing    string
		mutate     func(*v1alpha1.PaymentProviderSpec)
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    []string
	}{
		{
			name: "credentials Secret that does not exist is SecretNotFound", typ: v1alpha1.ProviderKukoPay,
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonSecretNotFound,
			wantMsg: []string{`credentials Secret "c1-creds" not found`},
		},
		{
			name: "credentials without the key the type needs is SecretKeyMissing", typ: v1alpha1.ProviderGeneric,
			secrets:    map[string]map[string]string{"c2-creds": {"apiKey": "not-a-token"}},
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonSecretKeyMissing,
			wantMsg: []string{`credentials Secret "c2-creds" lacks non-blank key(s) token`},
		},
		{
			name: "paypal credentials need both client keys", typ: v1alpha1.ProviderPayPal,
			secrets: map[string]map[string]string{"c3-creds": {"clientID": "id"}},
			mutate:  func(s *v1alpha1.PaymentProviderSpec) { s.Webhook.PayPalWebhookID = "WH1" },
			// an empty value is as missing as an absent key
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonSecretKeyMissing,
			wantMsg: []string{"clientSecret"},
		},
		{
			name: "signing Secret that does not exist is SecretNotFound", typ: v1alpha1.ProviderKukoPay,
			secrets: map[string]map[string]string{"c4-creds": kuko}, signing: "c4-signing-missing",
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonSecretNotFound,
			wantMsg: []string{`signing Secret "c4-signing-missing" not found`},
		},
		{
			name: "signing Secret without keys is SecretKeyMissing", typ: v1alpha1.ProviderKukoPay,
			secrets: map[string]map[string]string{"c5-creds": kuko, "c5-signing": {}}, signing: "c5-signing",
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonSecretKeyMissing,
			wantMsg: []string{`signing Secret "c5-signing" has no keys`},
		},
		{
			name: "paypal without a webhook id is InvalidConfig", typ: v1alpha1.ProviderPayPal,
			secrets:    map[string]map[string]string{"c6-creds": {"clientID": "id", "clientSecret": "s"}},
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{"webhook.paypalWebhookID is required"},
		},
		{
			name: "generic signing key that is not valid whsec_ base64 is InvalidConfig", typ: v1alpha1.ProviderGeneric,
			secrets: map[string]map[string]string{"c7-creds": {"token": "t"}, "c7-signing": {"current": "whsec_***not base64***"}},
			signing: "c7-signing", wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{`signing Secret "c7-signing" key "current"`},
		},
		{
			name: "complete kukopay config is Ready and counts its signing keys", typ: v1alpha1.ProviderKukoPay,
			secrets: map[string]map[string]string{"c8-creds": kuko, "c8-signing": {"old": "s1", "new": "s2"}}, signing: "c8-signing",
			wantStatus: metav1.ConditionTrue, wantReason: controllers.ReasonProviderConfigured,
			wantMsg: []string{"2 active key(s) (new, old)"},
		},
		{
			name: "kukopay without a signing Secret is Ready but says webhooks are rejected", typ: v1alpha1.ProviderKukoPay,
			secrets:    map[string]map[string]string{"c9-creds": kuko},
			wantStatus: metav1.ConditionTrue, wantReason: controllers.ReasonProviderConfigured,
			wantMsg: []string{"webhooks cannot be verified and are rejected"},
		},
		{
			name: "paypal with credentials and a webhook id is Ready", typ: v1alpha1.ProviderPayPal,
			secrets: map[string]map[string]string{"c10-creds": {"clientID": "id", "clientSecret": "s"}},
			mutate:  func(s *v1alpha1.PaymentProviderSpec) { s.Webhook.PayPalWebhookID = "WH-123" },
			// PayPal verifies through its API: no signing Secret needed.
			wantStatus: metav1.ConditionTrue, wantReason: controllers.ReasonProviderConfigured,
			wantMsg: []string{"webhook id WH-123"},
		},
		{
			// VerifyWebhook never uses a blank secret as a key: Ready would
			// promise webhooks that are all answered 401.
			name: "kukopay signing key of only whitespace is InvalidConfig naming the key", typ: v1alpha1.ProviderKukoPay,
			secrets: map[string]map[string]string{"c11-creds": kuko, "c11-signing": {"current": " \n"}}, signing: "c11-signing",
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{`signing Secret "c11-signing" key "current"`, "blank"},
		},
		{
			name: "stripe signing key of only whitespace is InvalidConfig naming the key", typ: v1alpha1.ProviderStripe,
			secrets: map[string]map[string]string{"c12-creds": {"secretKey": "sk_test"}, "c12-signing": {"whsec": "\t"}}, signing: "c12-signing",
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{`signing Secret "c12-signing" key "whsec"`, "blank"},
		},
		{
			name: "generic signing key of only whitespace is InvalidConfig naming the key", typ: v1alpha1.ProviderGeneric,
			secrets: map[string]map[string]string{"c13-creds": {"token": "t"}, "c13-signing": {"current": "  "}}, signing: "c13-signing",
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{`signing Secret "c13-signing" key "current"`, "blank"},
		},
		{
			// Verify skips it beside a real key, but the operator believes both work.
			name: "a blank signing key beside a real one is InvalidConfig naming the blank one", typ: v1alpha1.ProviderKukoPay,
			secrets: map[string]map[string]string{"c14-creds": kuko, "c14-signing": {"new": " ", "old": "s1"}}, signing: "c14-signing",
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{`signing Secret "c14-signing" key "new"`, "blank"},
		},
		{
			name: "paypal with a webhook id of only whitespace is InvalidConfig", typ: v1alpha1.ProviderPayPal,
			secrets:    map[string]map[string]string{"c15-creds": {"clientID": "id", "clientSecret": "s"}},
			mutate:     func(s *v1alpha1.PaymentProviderSpec) { s.Webhook.PayPalWebhookID = " \t" },
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonInvalidConfig,
			wantMsg: []string{"webhook.paypalWebhookID is required", "blank"},
		},
		{
			// A credential of only whitespace authenticates nothing: it is
			// refused here, not at the first call.
			name: "credentials of only whitespace are SecretKeyMissing", typ: v1alpha1.ProviderKukoPay,
			secrets:    map[string]map[string]string{"c16-creds": {"apiKey": " \n"}},
			wantStatus: metav1.ConditionFalse, wantReason: controllers.ReasonSecretKeyMissing,
			wantMsg: []string{`credentials Secret "c16-creds" lacks non-blank key(s) apiKey`},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "c" + strconv.Itoa(i+1)
			for secret, data := range tc.secrets {
				fixture.CreateSecret(t, env.Client, ns, secret, data)
			}
			p := providerObject(ns, name, tc.typ, name+"-creds", tc.signing)
			if tc.mutate != nil {
				tc.mutate(&p.Spec)
			}
			if err := env.Client.Create(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			got := fixture.WaitCondition(t, env.Client, p, v1alpha1.ConditionReady, tc.wantStatus, tc.wantReason, tc.wantMsg...)
			if want := "/webhooks/" + ns + "/" + name; got.Status.WebhookPath != want {
				t.Errorf("webhookPath = %q, want %q", got.Status.WebhookPath, want)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, got.Generation)
			}
		})
	}
}

func TestProviderFollowsSecretsWithoutRestart(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerProvider))
	ctx := context.Background()
	shop := providerObject(ns, "shop", v1alpha1.ProviderKukoPay, "shop-creds", "shop-signing")
	if err := env.Client.Create(ctx, shop); err != nil {
		t.Fatal(err)
	}
	waitReady := func(status metav1.ConditionStatus, reason string, fragments ...string) *v1alpha1.PaymentProvider {
		t.Helper()
		return fixture.WaitCondition(t, env.Client, shop, v1alpha1.ConditionReady, status, reason, fragments...)
	}

	waitReady(metav1.ConditionFalse, controllers.ReasonSecretNotFound, `credentials Secret "shop-creds"`)
	fixture.CreateSecret(t, env.Client, ns, "shop-creds", map[string]string{"apiKey": "sk_live"})
	waitReady(metav1.ConditionFalse, controllers.ReasonSecretNotFound, `signing Secret "shop-signing"`)
	fixture.CreateSecret(t, env.Client, ns, "shop-signing", map[string]string{"k1": "first"})
	waitReady(metav1.ConditionTrue, controllers.ReasonProviderConfigured, "1 active key(s) (k1)")

	// The circuit state is the gateway's: the provider controller's writes
	// must keep it.
	open := v1alpha1.CircuitStatus{State: v1alpha1.CircuitOpen, ConsecutiveFailures: 5, OpenedAt: &metav1.Time{Time: time.Now().Truncate(time.Second)}}
	if _, err := statuswriter.Update(ctx, statuswriter.Writer{Client: env.Client, APIReader: env.Client}, fixture.GetProvider(t, env.Client, ns, "shop"), func(p *v1alpha1.PaymentProvider) error {
		p.Status.Circuit = open
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "CircuitOpen", Message: "test"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Rotation: add the new key, then remove the old one.
	fixture.UpdateSecret(t, env.Client, ns, "shop-signing", map[string]string{"k1": "first", "k2": "second"})
	waitReady(metav1.ConditionTrue, controllers.ReasonProviderConfigured, "2 active key(s) (k1, k2)")
	fixture.UpdateSecret(t, env.Client, ns, "shop-signing", map[string]string{"k2": "second"})
	got := waitReady(metav1.ConditionTrue, controllers.ReasonProviderConfigured, "1 active key(s) (k2)")
	if d := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue {
		t.Errorf("Degraded condition clobbered: %s", fixture.Dump(got.Status.Conditions))
	}
	if got.Status.Circuit.State != v1alpha1.CircuitOpen || got.Status.Circuit.ConsecutiveFailures != 5 {
		t.Errorf("circuit clobbered: %s", fixture.Dump(got.Status.Circuit))
	}

	// A credential rotation that loses the key is caught as well.
	fixture.UpdateSecret(t, env.Client, ns, "shop-creds", map[string]string{"apiKey": ""})
	waitReady(metav1.ConditionFalse, controllers.ReasonSecretKeyMissing, "apiKey")
	fixture.UpdateSecret(t, env.Client, ns, "shop-creds", map[string]string{"apiKey": "sk_rotated"})
	waitReady(metav1.ConditionTrue, controllers.ReasonProviderConfigured)

	// Settled: a Secret change that changes nothing the verdict depends on
	// costs no status write (no hot loop either): the reconcile that read the
	// changed Secret writes nothing and arranges no other.
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-creds"}, s); err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	r := m.Reconciles.WaitSeen(t, controllers.ControllerProvider, shop, s)
	if w := m.Writes.By(r); len(w) != 0 {
		t.Errorf("%d status writes for an unchanged verdict", len(w))
	}
	if r.Scheduled() {
		t.Errorf("the reconcile of an unchanged verdict scheduled another: %+v", r)
	}

	if len(m.Events.About("shop", controllers.ReasonSecretNotFound)) == 0 || len(m.Events.About("shop", controllers.ReasonSecretKeyMissing)) == 0 {
		t.Errorf("no Warning events for the failures; events: %+v", m.Events.All())
	}
}
