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
//   - the thin cache (New) of every Payment, each decoded as a digest of
//     what finds it and what wakes it (Thin), never whole: the look-ups by
//     order and provider id, retention's scan, the gauges and the watch of
//     closed payments' news read it.
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
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Open selects the Payments the typed caches hold: those not closed.
func Open() fields.Selector {
	return fields.OneTermNotEqualSelector(v1alpha1.FieldClosed, "true")
}

// Cache is the thin cache of every Payment: each one decoded as a digest
// (the fields that find, judge and wake it, nothing else) and read back as
// a *v1alpha1.Payment with those fields set (Thin says which). It is a
// client.Reader of Payments and PaymentLists, a source of their changes
// (Source), and a runnable of the manager's caches: started before the
// controllers and waited for.
type Cache struct {
	c       cache.Cache
	indexes map[string]client.IndexerFunc
}

// GetCache makes Cache a cache runnable for the manager (mgr.Add).
func (c *Cache) GetCache() cache.Cache { return c.c }

// Start runs the cache until ctx ends.
func (c *Cache) Start(ctx context.Context) error { return c.c.Start(ctx) }

// WaitForCacheSync waits until the cache has listed every Payment.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool { return c.c.WaitForCacheSync(ctx) }

// Options say what a thin cache holds.
type Options struct {
	// Namespaces are the namespaces whose Payments it holds; all when none.
	Namespaces []string
	// Indexes are its indexes, by name: keys of the Payment Thin reads back.
	Indexes map[string]client.IndexerFunc
	// SyncPeriod overrides controller-runtime's resync period (tests).
	SyncPeriod *time.Duration
}

// New builds the thin cache o describes over the connection and REST mapper
// of c (a manager). Add it to the manager (mgr.Add).
func New(c cluster.Cluster, opts Options) (*Cache, error) {
	sch := runtime.NewScheme()
	gv := v1alpha1.GroupVersion
	sch.AddKnownTypeWithName(gv.WithKind("Payment"), &digest{})
	sch.AddKnownTypeWithName(gv.WithKind("PaymentList"), &digestList{})
	metav1.AddToGroupVersion(sch, gv)
	o := cache.Options{
		Scheme: sch, Mapper: c.GetRESTMapper(), HTTPClient: c.GetHTTPClient(),
		ByObject:                    map[client.Object]cache.ByObject{&digest{}: {Transform: trim}},
		ReaderFailOnMissingInformer: true,
		SyncPeriod:                  opts.SyncPeriod,
	}
	if len(opts.Namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	thin, err := cache.New(c.GetConfig(), o)
	if err != nil {
		return nil, fmt.Errorf("thin payment cache: %w", err)
	}
	// The informer before the indexes: ReaderFailOnMissingInformer refuses
	// reads of a type no informer serves, and indexes need one.
	if _, err := thin.GetInformer(context.Background(), &digest{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("thin payment cache: %w", err)
	}
	for name, keys := range opts.Indexes {
		err := thin.IndexField(context.Background(), &digest{}, name, func(o client.Object) []string {
			if p, ok := asPayment(o); ok {
				return buckets(keys(p))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("thin payment cache: index %s: %w", name, err)
		}
	}
	return &Cache{c: thin, indexes: opts.Indexes}, nil
}

// bucketCount is how many buckets the thin cache's indexes sort keys into.
// client-go's indexer keeps a set for each value it indexes: a set per
// merchant reference and per provider id would cost more than the digest
// itself. A bucket's set is shared by about n/bucketCount payments, each
// costing it one entry, and a look-up reads the bucket and keeps the
// payments whose own keys match (Cache.List).
const bucketCount = 4096

// buckets are the buckets of keys, each once.
func buckets(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if b := bucket(k); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

func bucket(key string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return strconv.FormatUint(uint64(h.Sum32()%bucketCount), 16)
}

// Get reads a Payment (obj: *v1alpha1.Payment) as Thin keeps it.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	p, ok := obj.(*v1alpha1.Payment)
	if !ok {
		return fmt.Errorf("thin payment cache: %T is not a Payment", obj)
	}
	var d digest
	if err := c.c.Get(ctx, key, &d, opts...); err != nil {
		return err
	}
	*p = *d.payment()
	return nil
}

// List lists Payments (list: *v1alpha1.PaymentList) as Thin keeps them.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pl, ok := list.(*v1alpha1.PaymentList)
	if !ok {
		return fmt.Errorf("thin payment cache: %T is not a PaymentList", list)
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	name, key, keys := c.byIndex(lo)
	if keys != nil {
		// The key's bucket, then the payments whose own keys match.
		lo.FieldSelector = fields.OneTermEqualSelector(name, bucket(key))
	}
	var dl digestList
	if err := c.c.List(ctx, &dl, lo); err != nil {
		return err
	}
	pl.ResourceVersion = dl.ResourceVersion
	pl.Items = matching(dl.Items, keys, key)
	return nil
}

// matching are the digests as Payments, those keys gives key when keys is
// set (the others only share its bucket).
func matching(ds []digest, keys client.IndexerFunc, key string) []v1alpha1.Payment {
	out := make([]v1alpha1.Payment, 0, len(ds))
	for i := range ds {
		p := ds[i].payment()
		if keys != nil && !slices.Contains(keys(p), key) {
			continue
		}
		out = append(out, *p)
	}
	return out
}

// byIndex is the index and key lo selects by, with the index's keys; nil
// keys when it selects by none of the cache's indexes.
func (c *Cache) byIndex(lo *client.ListOptions) (name, key string, keys client.IndexerFunc) {
	if lo.FieldSelector == nil {
		return "", "", nil
	}
	for n, k := range c.indexes {
		if v, ok := lo.FieldSelector.RequiresExactMatch(n); ok {
			return n, v, k
		}
	}
	return "", "", nil
}

// Source is a source of the thin cache's changes for a controller: each
// one as a *v1alpha1.Payment (Thin's fields), through preds, to h.
func (c *Cache) Source(h handler.TypedEventHandler[*v1alpha1.Payment, reconcile.Request], preds ...predicate.TypedPredicate[*v1alpha1.Payment]) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		inf, err := c.c.GetInformer(ctx, &digest{})
		if err != nil {
			return fmt.Errorf("thin payment cache: %w", err)
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if p, ok := asPayment(o); ok {
					e := event.TypedCreateEvent[*v1alpha1.Payment]{Object: p}
					if all(preds, func(f predicate.TypedPredicate[*v1alpha1.Payment]) bool { return f.Create(e) }) {
						h.Create(ctx, e, q)
					}
				}
			},
			UpdateFunc: func(old, cur any) {
				o, ok1 := asPayment(old)
				n, ok2 := asPayment(cur)
				if ok1 && ok2 {
					e := event.TypedUpdateEvent[*v1alpha1.Payment]{ObjectOld: o, ObjectNew: n}
					if all(preds, func(f predicate.TypedPredicate[*v1alpha1.Payment]) bool { return f.Update(e) }) {
						h.Update(ctx, e, q)
					}
				}
			},
			DeleteFunc: func(o any) {
				if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				if p, ok := asPayment(o); ok {
					e := event.TypedDeleteEvent[*v1alpha1.Payment]{Object: p}
					if all(preds, func(f predicate.TypedPredicate[*v1alpha1.Payment]) bool { return f.Delete(e) }) {
						h.Delete(ctx, e, q)
					}
				}
			},
		})
		return err
	})
}

func all[T any](xs []T, ok func(T) bool) bool {
	for _, x := range xs {
		if !ok(x) {
			return false
		}
	}
	return true
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
