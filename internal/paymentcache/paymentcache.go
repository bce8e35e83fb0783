// Package paymentcache keeps what the manager and the receiver hold of
// Payments small once they are settled (SPEC §12.4: memory follows work, not
// retention).
//
// A Payment with nothing left to do carries status.closed (payment.Closable,
// stored in the same write that settles it). Each process keeps two caches
// of Payments:
//
//   - the typed cache of open work (Open): full objects, every controller's
//     For() and indexes, as before;
//   - the thin cache (New) of every Payment, stripped to what finds it and
//     what wakes it (Thin): its identity lookups, retention's scan, the
//     gauges and the watch of closed payments' news read it.
//
// Reader puts them together for the readers that decide on money: a Payment
// not in the typed cache is read from the API server, and a look-up by order
// or provider id lists both caches, so a closed payment is found by a
// re-applied order or a late event as before. A payment is in the thin
// cache all along, open or closed; the typed cache, which woke the
// reconcile that looks up, has every open one that reconcile may race.
package paymentcache

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Open selects the Payments the typed caches hold: those not closed.
func Open() fields.Selector {
	return fields.OneTermNotEqualSelector(v1alpha1.FieldClosed, "true")
}

// Cache is the thin cache of every Payment (Thin). It is a runnable of the
// manager's caches: started before the controllers and waited for.
type Cache struct {
	cache.Cache
}

// GetCache makes Cache a cache runnable for the manager (mgr.Add).
func (c *Cache) GetCache() cache.Cache { return c.Cache }

// New builds the thin cache of the Payments in namespaces (all when none),
// with the indexes given (name → keys), over the connection, scheme and
// REST mapper of c (a manager). Add it to the manager (mgr.Add).
func New(c cluster.Cluster, namespaces []string, indexes map[string]client.IndexerFunc) (*Cache, error) {
	o := cache.Options{
		Scheme: c.GetScheme(), Mapper: c.GetRESTMapper(), HTTPClient: c.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.Payment{}: {Transform: Thin},
		},
		ReaderFailOnMissingInformer: true,
	}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	thin, err := cache.New(c.GetConfig(), o)
	if err != nil {
		return nil, fmt.Errorf("thin payment cache: %w", err)
	}
	// The informer before the indexes: ReaderFailOnMissingInformer refuses
	// reads of a type no informer serves, and indexes need one.
	if _, err := thin.GetInformer(context.Background(), &v1alpha1.Payment{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("thin payment cache: %w", err)
	}
	for name, keys := range indexes {
		if err := thin.IndexField(context.Background(), &v1alpha1.Payment{}, name, keys); err != nil {
			return nil, fmt.Errorf("thin payment cache: index %s: %w", name, err)
		}
	}
	return &Cache{Cache: thin}, nil
}

// Thin is the thin cache's transform: a Payment as far as it is found
// (provider, merchant reference, idempotency key, provider ids), judged
// by retention and the gauges (phase, conditions without their messages,
// the last history entry, adoption, deletion) and woken (its annotations
// but kubectl's copy of the manifest, generation, status.closed, the
// refund-failure mark). Nothing
// that decides on money reads it: Client reads the full object.
func Thin(obj any) (any, error) {
	p, ok := obj.(*v1alpha1.Payment)
	if !ok {
		return obj, nil
	}
	t := &v1alpha1.Payment{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Generation: p.Generation, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			Finalizers: p.Finalizers,
		},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: p.Spec.ProviderRef, MerchantReference: p.Spec.MerchantReference,
			IdempotencyKey: p.Spec.IdempotencyKey, ProviderPaymentID: p.Spec.ProviderPaymentID,
		},
		Status: v1alpha1.PaymentStatus{
			Phase: p.Status.Phase, ProviderPaymentID: p.Status.ProviderPaymentID, CheckoutID: p.Status.CheckoutID,
			AdoptedAt: p.Status.AdoptedAt, RefundFailureSeenAt: p.Status.RefundFailureSeenAt, Closed: p.Status.Closed,
			Query:   v1alpha1.QueryStatus{NextTime: p.Status.Query.NextTime},
			Actions: p.Status.Actions,
		},
	}
	for k, v := range p.Annotations {
		if k == corev1.LastAppliedConfigAnnotation {
			// The whole manifest again, and never read.
			continue
		}
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[k] = v
	}
	if n := len(p.Status.History); n > 0 {
		t.Status.History = []v1alpha1.HistoryEntry{{Time: p.Status.History[n-1].Time, To: p.Status.History[n-1].To}}
	}
	for _, c := range p.Status.Conditions {
		c.Message = ""
		t.Status.Conditions = append(t.Status.Conditions, c)
	}
	return t, nil
}

// Reader reads Payments from the typed cache of open work and, past it,
// from the thin cache and the API server; it reads and writes everything
// else as the client it wraps.
//
//   - Get of a Payment the typed cache does not hold (closed, or not seen
//     yet) reads the API server: a closed payment is woken by news, and the
//     news is decided on the whole object.
//   - List of Payments by one of Lookups (an index both caches keep) lists
//     the typed cache and the thin cache, which holds every Payment, and
//     reads each one only the thin cache found whole, from the API server
//     (one gone meanwhile is left out).
//   - Any other List of Payments lists the typed cache: open work.
type Reader struct {
	client.Reader
	// Thin is the thin cache (New), with the Lookups indexes.
	Thin client.Reader
	// API reads the API server.
	API client.Reader
	// Lookups are the Payment indexes that find closed payments too.
	Lookups []string
}

// Get implements client.Reader.
func (c Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Reader.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*v1alpha1.Payment); !ok || !apierrors.IsNotFound(err) {
		return err
	}
	return c.API.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (c Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pl, ok := list.(*v1alpha1.PaymentList)
	if !ok || !c.lookup(opts) {
		return c.Reader.List(ctx, list, opts...)
	}
	// The typed cache first, as before closed payments left it: the
	// reconcile that looks up was woken by it, so it holds every open
	// payment created before the one looking; the thin cache is another
	// informer and may be behind it. The thin cache adds the closed ones.
	var open, thin v1alpha1.PaymentList
	if err := c.Reader.List(ctx, &open, opts...); err != nil {
		return err
	}
	if err := c.Thin.List(ctx, &thin, opts...); err != nil {
		return err
	}
	items := open.Items
	seen := make(map[types.UID]bool, len(open.Items))
	for i := range open.Items {
		seen[open.Items[i].UID] = true
	}
	for i := range thin.Items {
		if seen[thin.Items[i].UID] {
			continue
		}
		key := types.NamespacedName{Namespace: thin.Items[i].Namespace, Name: thin.Items[i].Name}
		var p v1alpha1.Payment
		if err := c.Get(ctx, key, &p); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("read payment %s found by look-up: %w", key, err)
		}
		if seen[p.UID] {
			continue
		}
		seen[p.UID] = true
		items = append(items, p)
	}
	pl.Items = items
	return nil
}

// NewClient is c reading through a Reader over it: Payments as Reader reads
// them, everything else and every write as c.
func NewClient(c client.Client, thin, api client.Reader, lookups []string) client.Client {
	return readClient{Client: c, r: Reader{Reader: c, Thin: thin, API: api, Lookups: lookups}}
}

type readClient struct {
	client.Client
	r Reader
}

// Watch watches through the client wrapped, when it can (a test's client).
func (c readClient) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	w, ok := c.Client.(client.WithWatch)
	if !ok {
		return nil, fmt.Errorf("paymentcache: %T cannot watch", c.Client)
	}
	return w.Watch(ctx, list, opts...)
}

func (c readClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.r.Get(ctx, key, obj, opts...)
}

func (c readClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.r.List(ctx, list, opts...)
}

// lookup reports whether opts select by one of c.Lookups.
func (c Reader) lookup(opts []client.ListOption) bool {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector == nil {
		return false
	}
	for _, name := range c.Lookups {
		if _, ok := lo.FieldSelector.RequiresExactMatch(name); ok {
			return true
		}
	}
	return false
}

// Counting reads every Payment from the thin cache and everything else from
// the reader it wraps: for the gauges, which count closed payments too.
type Counting struct {
	client.Reader
	// Thin is the thin cache (New).
	Thin client.Reader
}

// List implements client.Reader.
func (c Counting) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.PaymentList); ok {
		return c.Thin.List(ctx, list, opts...)
	}
	return c.Reader.List(ctx, list, opts...)
}
