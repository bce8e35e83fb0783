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
//   - the thin cache (New) of every Payment, each kept as an Entry: its
//     identity, provider, phase and closed mark, hashes of its look-up keys
//     and a few answers judged on it as it was decoded (whether its news
//     changed, whether a start must wake it, its retention), a few hundred
//     bytes, never the payment: the look-ups by order and provider id,
//     retention's scan, the gauges' count of closed payments and the watch
//     of closed payments' news read it.
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
	"maps"
	"slices"
	"strconv"
	"sync"
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

// Cache is the thin cache of every Payment: an Entry of each (identity,
// provider, phase, closed, a few answers and its index keys' hashes, never
// the payment). It is a client.Reader of Payments (read back with those
// fields only) and of Entries, a source of their changes (Source), a count
// of closed payments (ClosedCounts), and a runnable of the manager's caches:
// started before the controllers and waited for.
type Cache struct {
	c cache.Cache
	// names are the indexes' names, sorted: an index's number (tagged) is
	// its place here.
	names   []string
	indexes map[string]client.IndexerFunc
	wake    func(*v1alpha1.Payment) bool
	buckets uint64
	// namespaces are those it holds; every one when empty.
	namespaces []string
	// fan hands the informers' changes to the count and to each Source;
	// stores are the informers' stores (New builds them all).
	fan    fanout
	stores []toolscache.Store

	mu     sync.Mutex
	closed map[Group]int
}

// Group is a group of payments the gauges count.
type Group struct {
	Namespace, Provider string
	Phase               v1alpha1.PaymentPhase
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
	// Indexes are its indexes, by name, over the payments as decoded (at
	// most 8). Look-ups by them are by namespace and by one key.
	Indexes map[string]client.IndexerFunc
	// Wake is judged on each payment as it is decoded: Entry.Wake.
	Wake func(*v1alpha1.Payment) bool
	// SyncPeriod overrides controller-runtime's resync period (tests).
	SyncPeriod *time.Duration
	// Buckets overrides how many buckets the indexes sort keys into
	// (DefaultBuckets; tests: 1 puts every key in one).
	Buckets int
}

// New builds the thin cache o describes over the connection and REST mapper
// of c (a manager). Add it to the manager (mgr.Add).
func New(c cluster.Cluster, opts Options) (*Cache, error) {
	names := slices.Sorted(maps.Keys(opts.Indexes))
	if len(names) > tagMask+1 {
		return nil, fmt.Errorf("thin payment cache: %d indexes, at most %d", len(names), tagMask+1)
	}
	tc := &Cache{names: names, indexes: opts.Indexes, wake: opts.Wake, buckets: DefaultBuckets, namespaces: opts.Namespaces, closed: map[Group]int{}}
	if opts.Buckets > 0 {
		tc.buckets = uint64(opts.Buckets)
	}
	o := cache.Options{
		Scheme: thinScheme(), Mapper: c.GetRESTMapper(), HTTPClient: c.GetHTTPClient(),
		ByObject:                    map[client.Object]cache.ByObject{&Entry{}: {Transform: tc.judge}},
		ReaderFailOnMissingInformer: true,
		SyncPeriod:                  opts.SyncPeriod,
		// Each informer's store (one per namespace when the cache has
		// namespaces), for the payments a new Source is handed (fanout).
		// Without controller-runtime's index by namespace (one more set
		// entry per payment): InNamespace reads the stores instead.
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			idx = maps.Clone(idx)
			delete(idx, toolscache.NamespaceIndex)
			inf := toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
			tc.stores = append(tc.stores, inf.GetStore())
			return inf
		},
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
	tc.c = thin
	// The informer before the indexes: ReaderFailOnMissingInformer refuses
	// reads of a type no informer serves, and indexes need one.
	inf, err := thin.GetInformer(context.Background(), &Entry{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("thin payment cache: %w", err)
	}
	if err := inf.AddIndexers(tc.indexers()); err != nil {
		return nil, fmt.Errorf("thin payment cache: indexes: %w", err)
	}
	tc.fan.subs = []toolscache.ResourceEventHandler{toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tc.count(o, 1) },
		UpdateFunc: func(old, cur any) { tc.count(old, -1); tc.count(cur, 1) },
		DeleteFunc: func(o any) { tc.count(o, -1) },
	}}
	if _, err := inf.AddEventHandler(&tc.fan); err != nil {
		return nil, fmt.Errorf("thin payment cache: %w", err)
	}
	return tc, nil
}

// judge is the informer's transform: it judges the payment an Entry was
// decoded from for the cache's options (Wake, the index keys) and lets it go.
// The reflector's store and the cache's apply it each: the second time there
// is nothing left to judge.
func (c *Cache) judge(obj any) (any, error) {
	e, ok := obj.(*Entry)
	if !ok {
		return obj, nil
	}
	whole := e.judged()
	if whole == nil {
		return obj, nil
	}
	p := whole.payment()
	if c.wake != nil {
		e.wake = c.wake(p)
	}
	for i, name := range c.names {
		for _, k := range c.indexes[name](p) {
			e.addKey(tagged(i, k))
		}
	}
	return e, nil
}

// thinScheme decodes Payments as Entries.
func thinScheme() *runtime.Scheme {
	sch := runtime.NewScheme()
	gv := v1alpha1.GroupVersion
	sch.AddKnownTypeWithName(gv.WithKind("Payment"), &Entry{})
	sch.AddKnownTypeWithName(gv.WithKind("PaymentList"), &EntryList{})
	metav1.AddToGroupVersion(sch, gv)
	return sch
}

// indexers are the informer's one index, keyIndex: every look-up key of a
// payment, of every index of the cache, by the bucket of its hash in the
// payment's namespace (the field indexes controller-runtime builds keep
// every key twice, once for all namespaces). A set per index and bucket
// held each payment once per key in sets a few entries large, which cost
// more than the entry; in one index the sets are a few times larger and
// hold each payment once per bucket of its keys.
func (c *Cache) indexers() toolscache.Indexers {
	return toolscache.Indexers{"field:" + keyIndex: func(obj any) ([]string, error) { return c.bucketsOf(obj), nil }}
}

// keyIndex is the field the thin cache's one index is looked up by.
const keyIndex = "paymentcache.keys"

// count adds n to the count of obj's group, when it is a closed payment.
func (c *Cache) count(obj any, n int) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	e, ok := obj.(*Entry)
	if !ok || !e.closed {
		return
	}
	g := Group{Namespace: e.GetNamespace(), Provider: e.Provider(), Phase: e.Phase()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed[g] += n; c.closed[g] <= 0 {
		delete(c.closed, g)
	}
}

// ClosedCounts are the closed payments the cache holds, by group.
func (c *Cache) ClosedCounts() map[Group]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.closed)
}

// DefaultBuckets is how many buckets the thin cache's index sorts keys into,
// in each namespace. client-go's indexer keeps a set for each value it
// indexes: a set per merchant reference and per provider id would cost more
// than the entry itself. A bucket's set is shared by the payments of about
// keys/DefaultBuckets keys, each costing it one entry, and a look-up reads
// the bucket and keeps the payments that have its key (Cache.List).
const DefaultBuckets = 4096

// bucketsOf are the buckets, in its namespace, of obj's keys, each once:
// the values controller-runtime's reader looks the index up by.
func (c *Cache) bucketsOf(obj any) []string {
	e, ok := obj.(*Entry)
	if !ok {
		return nil
	}
	var out []string
	for _, h := range e.keyHashes() {
		if v := e.GetNamespace() + "/" + c.bucket(h); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// bucket is the bucket of a key's hash, its index's tag left out.
func (c *Cache) bucket(h uint64) string { return strconv.FormatUint((h>>3)%c.buckets, 16) }

// Get reads a Payment (obj: *v1alpha1.Payment, with the fields Entry.payment
// sets) or an *Entry.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var e Entry
	if err := c.c.Get(ctx, key, &e, opts...); err != nil {
		return err
	}
	switch o := obj.(type) {
	case *v1alpha1.Payment:
		*o = *e.payment()
	case *Entry:
		*o = e
	default:
		return fmt.Errorf("thin payment cache: %T is not a Payment", obj)
	}
	return nil
}

// List lists Payments (list: *v1alpha1.PaymentList, with the fields
// Entry.payment sets) or Entries (*EntryList). A look-up by one of its
// indexes is by namespace.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	i, key, byIndex := c.byIndex(lo)
	if byIndex {
		if lo.Namespace == "" {
			return fmt.Errorf("thin payment cache: a look-up by %s is by namespace", c.names[i])
		}
		// The key's bucket, then the payments that have the key.
		lo.FieldSelector = fields.OneTermEqualSelector(keyIndex, c.bucket(tagged(i, key)))
	}
	var el EntryList
	switch {
	case byIndex:
		if err := c.c.List(ctx, &el, lo); err != nil {
			return err
		}
		el.Items = withKey(el.Items, i, key)
	case lo.LabelSelector != nil && !lo.LabelSelector.Empty() || lo.FieldSelector != nil && !lo.FieldSelector.Empty():
		return fmt.Errorf("thin payment cache: lists by namespace or by one of its indexes, not by %v %v", lo.LabelSelector, lo.FieldSelector)
	case lo.Namespace != "" && len(c.namespaces) > 0 && !slices.Contains(c.namespaces, lo.Namespace):
		return fmt.Errorf("thin payment cache: namespace %q is not one it holds (%v)", lo.Namespace, c.namespaces)
	default:
		for _, e := range c.InNamespace(lo.Namespace) {
			el.Items = append(el.Items, *e)
		}
	}
	switch l := list.(type) {
	case *v1alpha1.PaymentList:
		l.ResourceVersion = el.ResourceVersion
		l.Items = make([]v1alpha1.Payment, len(el.Items))
		for j := range el.Items {
			l.Items[j] = *el.Items[j].payment()
		}
	case *EntryList:
		*l = el
	default:
		return fmt.Errorf("thin payment cache: %T is not a PaymentList", list)
	}
	return nil
}

// Has reports whether e has key in the index named index: what a look-up
// by that key would find it by, without reading the payment.
func (c *Cache) Has(e *Entry, index, key string) bool {
	i, ok := slices.BinarySearch(c.names, index)
	return ok && e.has(i, key)
}

// withKey are the entries of es that have key in index number i (the
// others only share its bucket).
func withKey(es []Entry, i int, key string) []Entry {
	return slices.DeleteFunc(es, func(e Entry) bool { return !e.has(i, key) })
}

// byIndex is the index lo selects by (its number) and the key; false when
// it selects by none of the cache's indexes.
func (c *Cache) byIndex(lo *client.ListOptions) (int, string, bool) {
	if lo.FieldSelector == nil {
		return 0, "", false
	}
	for i, n := range c.names {
		if v, ok := lo.FieldSelector.RequiresExactMatch(n); ok {
			return i, v, true
		}
	}
	return 0, "", false
}

// Source is a source of the thin cache's changes for a controller: each
// one as an *Entry, through preds, to h.
func (c *Cache) Source(h handler.TypedEventHandler[*Entry, reconcile.Request], preds ...predicate.TypedPredicate[*Entry]) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		// Once the cache has listed every Payment (GetInformer waits).
		if _, err := c.c.GetInformer(ctx, &Entry{}); err != nil {
			return fmt.Errorf("thin payment cache: %w", err)
		}
		c.fan.subscribe(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if e, ok := o.(*Entry); ok {
					ev := event.TypedCreateEvent[*Entry]{Object: e}
					if all(preds, func(f predicate.TypedPredicate[*Entry]) bool { return f.Create(ev) }) {
						h.Create(ctx, ev, q)
					}
				}
			},
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*Entry)
				n, ok2 := cur.(*Entry)
				if ok1 && ok2 {
					ev := event.TypedUpdateEvent[*Entry]{ObjectOld: o, ObjectNew: n}
					if all(preds, func(f predicate.TypedPredicate[*Entry]) bool { return f.Update(ev) }) {
						h.Update(ctx, ev, q)
					}
				}
			},
			DeleteFunc: func(o any) {
				if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				if e, ok := o.(*Entry); ok {
					ev := event.TypedDeleteEvent[*Entry]{Object: e}
					if all(preds, func(f predicate.TypedPredicate[*Entry]) bool { return f.Delete(ev) }) {
						h.Delete(ctx, ev, q)
					}
				}
			},
		}, c.held)
		return nil
	})
}

// InNamespace are the entries the cache holds in namespace ns (every one
// when ns is empty): the cache's own, read and never changed, without the
// copy a List makes of each.
func (c *Cache) InNamespace(ns string) []*Entry {
	var out []*Entry
	for _, o := range c.held() {
		if e, ok := o.(*Entry); ok && (ns == "" || e.GetNamespace() == ns) {
			out = append(out, e)
		}
	}
	return out
}

// held is every entry the cache's informers hold.
func (c *Cache) held() []any {
	var out []any
	for _, s := range c.stores {
		out = append(out, s.List()...)
	}
	return out
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
//     yet), or that the thin cache holds closed (the typed cache has not
//     heard it close yet), reads the API server: a closed payment is woken
//     by news, and the news is decided on the whole object.
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
	if _, ok := obj.(*v1alpha1.Payment); !ok {
		return err
	}
	switch {
	case err == nil && !c.closedInThin(ctx, key):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return c.API.Get(ctx, key, obj, opts...)
}

// closedInThin reports whether the thin cache holds the payment closed. The
// typed cache's copy is then one it has not heard close yet (the two are
// separate informers), and the news that woke the reader, heard by the thin
// cache, may be the closing itself.
func (c Reader) closedInThin(ctx context.Context, key client.ObjectKey) bool {
	if c.Thin == nil {
		return false
	}
	var p v1alpha1.Payment
	return c.Thin.Get(ctx, key, &p) == nil && p.Status.Closed
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

// Counting is what the gauges read: Payments from the reader it wraps (the
// cache of open work), and the closed ones as counts (ClosedCounts), so a
// scrape never lists the settled payments one by one. A payment that
// closes leaves one cache a moment before the other counts it: a scrape
// in between may miss it, or count it twice.
type Counting struct {
	client.Reader
	// Thin is the thin cache (New).
	Thin *Cache
}

// ClosedCounts are the closed payments, by group.
func (c Counting) ClosedCounts() map[Group]int { return c.Thin.ClosedCounts() }
