package webhookreceiver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox/inboxtest"
)

// receiverUser is the identity the shipped RBAC binds.
const receiverUser = "system:serviceaccount:paywarden-system:paywarden-receiver"

// The shipped least-privilege RBAC of config/receiver is exactly enough: a
// receiver running as its ServiceAccount verifies, stores, applies and
// records an event, and Kubernetes Events are written; and it cannot delete
// anything or change a spec.
func TestShippedRBACIsEnoughAndNoMore(t *testing.T) {
	applyRBAC(t, filepath.Join(env.Root, "config", "receiver", "role.yaml"), filepath.Join(env.Root, "config", "receiver", "role_binding.yaml"))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: receiverUser, Groups: []string{"system:serviceaccounts", "system:authenticated"}}

	// RBAC takes effect asynchronously in the authorizer's cache.
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
		err := as.List(context.Background(), &v1alpha1.PaymentList{})
		return err == nil, "receiver identity cannot list payments yet: " + errString(err)
	})

	r, err := inboxtest.StartReceiver(cfg, env.Scheme, inboxtest.ReceiverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })

	k := kukoPay{ns: inboxtest.Namespace(t, env.Client, "rbac"), name: "kukopay", secret: "rbac-secret"}
	k.prov = inboxtest.CreateProvider(t, env.Client, inboxtest.Provider{
		Namespace: k.ns, Name: k.name, Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"current": k.secret},
	})
	inboxtest.WaitCached(t, r.Cache, k.prov)
	p := inboxtest.CreatePayment(t, env.Client, k.ns, "order-rbac", k.name, "order-rbac", "pay_rbac", 100, "USD")
	inboxtest.WaitCached(t, r.Cache, p)

	ev := k.event("evt_rbac", "payment.failed", "failed", p)
	body := ev.Body(t)
	resp := inboxtest.Send(t, "POST", r.WebhookURL(k.ns, k.name), body, inboxtest.KukoPayHeader(body, time.Now(), k.secret))
	wantCode(t, resp, http.StatusOK)
	if e := inboxtest.WaitResult(t, env.Client, k.ns, k.name, "evt_rbac"); e == nil || e.Status.Result != v1alpha1.ResultApplied {
		t.Fatalf("event %+v, want Applied by a receiver running with the shipped RBAC", e)
	}
	if got := inboxtest.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("payment %s, want Failed", got.Status.Phase)
	}
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
		var l eventsv1.EventList
		if err := env.Client.List(context.Background(), &l, client.InNamespace(k.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Regarding.Name == p.Name && e.Reason == string(v1alpha1.PhaseFailed) {
				return true, ""
			}
		}
		return false, "no Kubernetes Event for the transition"
	})

	ctx := context.Background()
	evt := inboxtest.EventFor(t, env.Client, k.ns, k.name, "evt_rbac")
	for name, err := range map[string]error{
		"delete a WebhookEvent": as.Delete(ctx, evt),
		"delete a Payment":      as.Delete(ctx, p.DeepCopy()),
		"update a Payment spec": as.Update(ctx, inboxtest.GetPayment(t, env.Client, p)),
		"create a Payment": as.Create(ctx, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "forged"},
			Spec: v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: k.name}, Amount: v1alpha1.Amount{Value: 1, Currency: "USD"}}}),
		"update a PaymentProvider": as.Update(ctx, k.prov.DeepCopy()),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the receiver: %v, want Forbidden", name, err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// applyRBAC creates the ClusterRoles and ClusterRoleBindings of the files.
func applyRBAC(t *testing.T, files ...string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := utilyaml.NewYAMLReader(bufioReader(raw))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatal(err)
			}
			var obj client.Object
			switch meta.Kind {
			case "ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			case "":
				continue
			default:
				t.Fatalf("%s: unexpected kind %s", f, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
