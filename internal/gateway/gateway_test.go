package gateway

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestAChangedProviderHasItsRefusedConfigurationCheckedAgain: a changed
// PaymentProvider (or credentials Secret) gets a new entry without the old
// one's configuration problem, and when there was one the provider
// controller is told, so Ready=False clears without waiting for a probe. A
// change of a provider whose configuration worked announces nothing.
func TestAChangedProviderHasItsRefusedConfigurationCheckedAgain(t *testing.T) {
	refused := &provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}
	for _, tc := range []struct {
		name      string
		refused   bool
		subscribe bool
		want      int
	}{
		{"a refused configuration is re-checked after the change", true, true, 1},
		{"a working configuration: the change announces nothing", false, true, 0},
		{"a refused configuration with nobody subscribed: nothing to call", true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithObjects(
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "creds"}, Data: map[string][]byte{"apiKey": []byte("k")}},
			).Build()
			prov := &v1alpha1.PaymentProvider{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kukopay", Generation: 1},
				Spec: v1alpha1.PaymentProviderSpec{
					Type: v1alpha1.ProviderKukoPay, APIURL: "http://127.0.0.1:1",
					CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
				},
			}
			g := &Gateway{Reader: c, Clock: clocktesting.NewFakePassiveClock(t0)}
			var notified []types.NamespacedName
			if tc.subscribe {
				g.Notify = func(key types.NamespacedName) { notified = append(notified, key) }
			}
			e, err := g.For(ctx, prov)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused {
				if adm := e.Admit("p", Scheduled, t0); !adm.OK {
					t.Fatalf("first call: %+v", adm)
				}
				e.Done(ctx, refused)
			}
			notified = nil // the refusal's own announcement is TestConfigProbeTiming's

			prov.Generation++
			next, err := g.For(ctx, prov)
			if err != nil {
				t.Fatal(err)
			}
			if next == e {
				t.Fatal("a changed provider kept its entry")
			}
			if msg := next.ConfigProblem(); msg != "" {
				t.Errorf("the new entry starts with the old configuration's problem %q", msg)
			}
			want := slices.Repeat([]types.NamespacedName{{Namespace: "shop", Name: "kukopay"}}, tc.want)
			if !slices.Equal(notified, want) {
				t.Errorf("notified %v, want %v", notified, want)
			}
		})
	}
}
