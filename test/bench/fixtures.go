package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/webhookbundle"
	"github.com/paywarden/paywarden/test/harness"
)

// signingSecret signs the benchmark's KukoPay webhooks (paysim's and the
// harness's own).
const signingSecret = "bench-kukopay-signing-secret"

// providerSpec describes one PaymentProvider of the benchmark (always
// KukoPay: the cheapest signature, so the receiver's own cost shows).
type providerSpec struct {
	ns, name, apiURL string
	qps, burst       int32
	schedule         []time.Duration
}

func createNamespace(ctx context.Context, c client.Client, ns string) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

func createProvider(ctx context.Context, c client.Client, p providerSpec) (*v1alpha1.PaymentProvider, error) {
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name + "-credentials"},
		StringData: map[string]string{kukopay.CredentialAPIKey: "sk_bench"}}
	signing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name + "-webhook"},
		StringData: map[string]string{"current": signingSecret}}
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type:                 v1alpha1.ProviderKukoPay,
			APIURL:               p.apiURL,
			CredentialsSecretRef: v1alpha1.SecretReference{Name: creds.Name},
			Webhook:              v1alpha1.WebhookConfig{SigningSecretRef: &v1alpha1.SecretReference{Name: signing.Name}},
		},
	}
	if p.qps > 0 {
		prov.Spec.StatusQuery.QPS, prov.Spec.StatusQuery.Burst = &p.qps, &p.burst
	}
	for _, d := range p.schedule {
		prov.Spec.StatusQuery.Schedule = append(prov.Spec.StatusQuery.Schedule, metav1.Duration{Duration: d})
	}
	for _, o := range []client.Object{creds, signing, prov} {
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("create %s: %w", o.GetName(), err)
		}
	}
	// The receiver verifies with the bundle the manager publishes; the
	// receiver phases run without a manager, so the benchmark publishes the
	// same bundle (a manager started later finds it up to date).
	bundle := webhookbundle.Desired(harness.SystemNamespace, prov,
		&corev1.Secret{Data: map[string][]byte{"current": []byte(signingSecret)}}, nil)
	// Every bundle of the benchmark holds the same signing secret, so one
	// already there is this one.
	if err := c.Create(ctx, bundle); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("publish the webhook bundle of %s/%s: %w", p.ns, p.name, err)
	}
	return prov, nil
}

// payment is a Payment of the benchmark. Tracked payments (providerID set)
// need no manager: the receiver phases apply webhooks to them directly.
func newPayment(ns, name, provider, ref, providerID string, meta map[string]string) *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: provider},
			Amount:            v1alpha1.Amount{Value: 1999, Currency: "USD"},
			MerchantReference: ref,
			ProviderPaymentID: providerID,
			Metadata:          meta,
		},
	}
}

// createAll creates objects with a few parallel writers.
func createAll[T client.Object](ctx context.Context, c client.Client, objs []T) error {
	return forAll(objs, "creates", func(o T) error { return c.Create(ctx, o) })
}

// updateStatusAll writes the objects' status with a few parallel writers.
func updateStatusAll[T client.Object](ctx context.Context, c client.Client, objs []T) error {
	return forAll(objs, "status updates", func(o T) error { return c.Status().Update(ctx, o) })
}

// deleteAll deletes objects one by one with a few parallel writers: one
// DELETE of a whole collection of 100 000 objects outlasts the API
// server's request timeout.
func deleteAll[T client.Object](ctx context.Context, c client.Client, objs []T) error {
	return forAll(objs, "deletes", func(o T) error { return client.IgnoreNotFound(c.Delete(ctx, o)) })
}

// forAll runs op on every object with 16 parallel writers, each op tried up
// to five times.
func forAll[T any](objs []T, what string, op func(T) error) error {
	const writers = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan T)
	)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if err = op(o); err == nil {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, o := range objs {
		next <- o
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d %s failed, e.g. %w", len(errs), what, errs[0])
	}
	return nil
}

// pendingMeta scripts a paysim payment that never settles: it stays in flight.
var pendingMeta = map[string]string{paysim.MetaOutcome: string(paysim.OutcomePending)}

// kukoPayEvent renders a payment.succeeded event exactly as KukoPay (and
// paysim) send it, from the adapter's wire types.
func kukoPayEvent(id, paymentID, ref string, amount int64, currency string, at time.Time) []byte {
	obj := kukopay.PaymentObject{
		ID: paymentID, Object: "payment", OutTradeNo: ref, Amount: amount,
		AmountReceived: amount, Currency: currency, Status: "succeeded", Created: at.Unix(),
	}
	data, _ := json.Marshal(obj)
	body, _ := json.Marshal(kukopay.EventObject{ID: id, Object: "event", Type: "payment.succeeded", Created: at.Unix(), Data: kukopay.EventData{Object: data}})
	return body
}
