package webhookbundle_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

func prov(typ v1alpha1.ProviderType) *v1alpha1.PaymentProvider {
	return &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pay", UID: "uid-1"},
		Spec: v1alpha1.PaymentProviderSpec{Type: typ}}
}

func secret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestDesired(t *testing.T) {
	signing := secret(map[string]string{"current": "s1", "next": "s2", "empty": ""})
	creds := secret(map[string]string{
		kukopay.CredentialAPIKey: "sk", paypal.CredentialClientID: "id", paypal.CredentialClientSecret: "cs",
		generic.CredentialToken: "tok", "unrelated": "x",
	})
	for _, tc := range []struct {
		name string
		typ  v1alpha1.ProviderType
		want []string
	}{
		{"kukopay carries its signing keys and no API credentials", v1alpha1.ProviderKukoPay, []string{"signing.current", "signing.next"}},
		{"generic carries its signing keys and no API credentials", v1alpha1.ProviderGeneric, []string{"signing.current", "signing.next"}},
		{"paypal carries exactly the credentials its verification call needs", v1alpha1.ProviderPayPal,
			[]string{"credentials.clientID", "credentials.clientSecret", "signing.current", "signing.next"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := webhookbundle.Desired("paywarden-system", prov(tc.typ), signing, creds)
			if got := slices.Sorted(maps.Keys(b.Data)); !slices.Equal(got, tc.want) {
				t.Fatalf("keys %v, want %v", got, tc.want)
			}
			if b.Namespace != "paywarden-system" || b.Name != webhookbundle.Name("shop", "pay") || b.Labels[webhookbundle.Label] != "true" {
				t.Fatalf("bundle %s/%s labels %v", b.Namespace, b.Name, b.Labels)
			}
			if !webhookbundle.For(b, prov(tc.typ)) {
				t.Fatalf("bundle does not name its provider: %v", b.Annotations)
			}
		})
	}
	t.Run("missing Secrets make a bundle without secrets", func(t *testing.T) {
		b := webhookbundle.Desired("paywarden-system", prov(v1alpha1.ProviderPayPal), nil, nil)
		if len(b.Data) != 0 || len(webhookbundle.SigningSecrets(b)) != 0 {
			t.Fatalf("data %v", b.Data)
		}
	})
}

func TestNameIsBoundedAndUnambiguous(t *testing.T) {
	long := strings.Repeat("a", 253)
	if n := webhookbundle.Name(strings.Repeat("n", 63), long); len(n) > 63 {
		t.Errorf("name %q longer than 63", n)
	}
	// "a-b"/"c" and "a"/"b-c" would collide if the name were a concatenation.
	if webhookbundle.Name("a-b", "c") == webhookbundle.Name("a", "b-c") {
		t.Errorf("names collide")
	}
}

func TestForRejectsAnotherProviderObject(t *testing.T) {
	b := webhookbundle.Desired("paywarden-system", prov(v1alpha1.ProviderKukoPay), nil, nil)
	recreated := prov(v1alpha1.ProviderKukoPay)
	recreated.UID = "uid-2"
	if webhookbundle.For(b, recreated) {
		t.Errorf("a bundle written for an earlier provider of the same name is accepted")
	}
	b.Labels = nil
	if _, _, ok := webhookbundle.Provider(b); ok {
		t.Errorf("a Secret without the bundle label is taken for a bundle")
	}
}

func TestSigningSecretsAndAdapterCredentials(t *testing.T) {
	b := webhookbundle.Desired("paywarden-system", prov(v1alpha1.ProviderPayPal),
		secret(map[string]string{"b": "second", "a": "first"}),
		secret(map[string]string{paypal.CredentialClientID: "id", paypal.CredentialClientSecret: "cs"}))
	got := webhookbundle.SigningSecrets(b)
	if len(got) != 2 || string(got[0]) != "first" || string(got[1]) != "second" {
		t.Errorf("signing secrets %q, want ordered by key", got)
	}
	creds := webhookbundle.AdapterCredentials(b, "paypal")
	if string(creds[paypal.CredentialClientID]) != "id" || string(creds[paypal.CredentialClientSecret]) != "cs" || len(creds) != 2 {
		t.Errorf("paypal adapter credentials %v", slices.Sorted(maps.Keys(creds)))
	}
	k := webhookbundle.Desired("paywarden-system", prov(v1alpha1.ProviderKukoPay), secret(map[string]string{"a": "s"}),
		secret(map[string]string{kukopay.CredentialAPIKey: "sk_live"}))
	placeholder := webhookbundle.AdapterCredentials(k, "kukopay")[kukopay.CredentialAPIKey]
	if len(placeholder) == 0 || string(placeholder) == "sk_live" {
		t.Errorf("kukopay adapter credential %q, want a placeholder (the bundle has no API key)", placeholder)
	}
}

func TestUpToDate(t *testing.T) {
	want := webhookbundle.Desired("paywarden-system", prov(v1alpha1.ProviderKukoPay), secret(map[string]string{"a": "s"}), nil)
	have := want.DeepCopy()
	have.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	if !webhookbundle.UpToDate(have, want) {
		t.Errorf("an extra annotation makes the bundle stale")
	}
	have.Data["signing.a"] = []byte("old")
	if webhookbundle.UpToDate(have, want) {
		t.Errorf("changed data not noticed")
	}
}
