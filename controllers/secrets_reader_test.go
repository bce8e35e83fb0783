package controllers_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/scheme"
)

// TestSecretReaderAsksTheAPIServerBeforeSayingASecretIsMissing: a Secret
// applied with its PaymentProvider may reach the API server before the
// manager's metadata cache shows it. The reader must read it from the API
// server then, not report it missing: the bundle controller would publish
// the provider's bundle without its signing secret, and the receiver answer
// the provider's webhooks 401 until the watch caught up (a clean-clone CI
// run under load failed TestWebhookEventProcessor on exactly that). A Secret
// the API server does not have either is still missing.
func TestSecretReaderAsksTheAPIServerBeforeSayingASecretIsMissing(t *testing.T) {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pay", Name: "kukopay-webhook"}, Data: map[string][]byte{"current": []byte("secret")}}
	api := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s).Build()
	lagging := fake.NewClientBuilder().WithScheme(scheme.New()).Build() // has not seen it yet
	r := &controllers.SecretReader{Metadata: lagging, API: api}

	got := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: "pay", Name: "kukopay-webhook"}, got); err != nil {
		t.Fatalf("a Secret the cache has not seen yet: %v, want it read from the API server", err)
	}
	if string(got.Data["current"]) != "secret" {
		t.Fatalf("read %v", got.Data)
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: "pay", Name: "absent"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Secret the API server does not have: %v, want NotFound", err)
	}
}
