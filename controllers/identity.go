package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// +kubebuilder:rbac:groups="",namespace=paywarden-system,resources=configmaps,verbs=get;create;update

// Ledger keeps the identities and outcomes of settled Payments and Refunds
// after their objects are gone (internal/ledger; SPEC §12.1). The Payment and
// Refund reconcilers read it before a first create or refund and write to it
// before they let a deleted object go.
type Ledger interface {
	Get(ctx context.Context, identity string) ([]payment.LedgerRecord, error)
	Put(ctx context.Context, identity string, rec payment.LedgerRecord) error
}

// holdMoney puts the money-in-flight finalizer on obj before a marker of a
// money-moving call is stored, with the object's UID in the
// money-uid annotation (a copy restored with a new UID is told from the
// object that sent the call) and any other annotations given: from then on
// the object cannot disappear before it is settled and remembered. The patch
// is conditional on the version read, and obj is updated to what the API
// server stored. also changes obj further, in the same patch.
func holdMoney(ctx context.Context, c client.Client, obj client.Object, annotations map[string]string, also ...func() error) error {
	if held(obj) {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	hold(obj, annotations)
	for _, f := range also {
		if err := f(); err != nil {
			return err
		}
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer %s: %w", v1alpha1.FinalizerMoneyInFlight, err)
	}
	return nil
}

// held reports whether obj carries the money-in-flight finalizer for
// itself (not for an object it was restored from).
func held(obj client.Object) bool {
	return controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerMoneyInFlight) && obj.GetAnnotations()[v1alpha1.AnnotationMoneyUID] == string(obj.GetUID())
}

// hold puts the money-in-flight finalizer and the money-uid annotation (and
// any others given) on obj, in memory.
func hold(obj client.Object, annotations map[string]string) {
	controllerutil.AddFinalizer(obj, v1alpha1.FinalizerMoneyInFlight)
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(a, annotations)
	a[v1alpha1.AnnotationMoneyUID] = string(obj.GetUID())
	obj.SetAnnotations(a)
}

// letGo records a settled, deleted object in the ledger (when it has a
// record) and removes the finalizer, so the deletion completes.
func letGo(ctx context.Context, c client.Client, l Ledger, obj client.Object, identity string, rec payment.LedgerRecord, remember bool) error {
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerMoneyInFlight) {
		return nil
	}
	if remember && l != nil {
		if err := l.Put(ctx, identity, rec); err != nil {
			return fmt.Errorf("remember %s in the ledger before it goes: %w", obj.GetName(), err)
		}
	}
	base := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, v1alpha1.FinalizerMoneyInFlight)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("remove finalizer %s: %w", v1alpha1.FinalizerMoneyInFlight, err))
	}
	return nil
}

// letGoUnsettled lets a deleted object whose money cannot be settled any
// more (its provider or payment is gone) go, recorded in the ledger as it
// stands, with a Warning Event saying so.
func letGoUnsettled(ctx context.Context, c client.Client, l Ledger, rec events.EventRecorder, obj client.Object, identity string, record payment.LedgerRecord, why string) error {
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerMoneyInFlight) {
		return nil
	}
	if err := letGo(ctx, c, l, obj, identity, record, identity != ""); err != nil {
		return err
	}
	if rec != nil {
		rec.Eventf(obj, nil, corev1.EventTypeWarning, "DeletedUnsettled", "Delete",
			"%s; remembered in the ledger as %s, unsettled: an object of the same name applied again waits for review; check the provider (id %q)",
			why, record.Phase, record.ProviderID)
	}
	return nil
}

// deletionWaits tells `kubectl describe` why a deleted object is still there.
func deletionWaits(rec events.EventRecorder, obj client.Object, what string) {
	if rec == nil {
		return
	}
	rec.Eventf(obj, nil, corev1.EventTypeNormal, "DeletionWaits", "Delete",
		"deletion waits for %s: money may be moving; the object goes once it is settled and remembered in the ledger", what)
}

// paymentLedgerFacts reads the ledger's records of the payment's order
// while nothing of it was sent (payment.Unsent: before its first create, or
// parked before any; nothing when the ledger is off).
func paymentLedgerFacts(ctx context.Context, l Ledger, rec events.EventRecorder, p *v1alpha1.Payment) ([]payment.LedgerRecord, error) {
	if l == nil || !payment.Unsent(p) {
		return nil, nil
	}
	return readLedger(ctx, l, rec, p, p.OrderIdentity(), fmt.Sprintf("merchant reference %q", p.MerchantRef()))
}

// readLedger reads the records of identity for obj, which has not been sent.
// A line of it the manager cannot read keeps obj waiting (an error: the
// reconcile is retried on its backoff) and says so where `kubectl describe`
// shows it: a Warning Event LedgerUnreadable naming the line.
func readLedger(ctx context.Context, l Ledger, rec events.EventRecorder, obj client.Object, identity, what string) ([]payment.LedgerRecord, error) {
	recs, err := l.Get(ctx, identity)
	if err == nil {
		return recs, nil
	}
	err = fmt.Errorf("read the ledger of %s: %w", what, err)
	if rec != nil && errors.Is(err, payment.ErrUnreadableRecord) {
		rec.Eventf(obj, nil, corev1.EventTypeWarning, "LedgerUnreadable", "Create",
			"nothing is sent until the ledger line is fixed (docs/operations.md, \"Deleting payments, and the ledger\"): %v", err)
	}
	return nil, err
}
