// Package ledger keeps the identities and outcomes of settled Payments and
// Refunds after their objects are gone (SPEC §12.1), so that an object of the
// same order applied again — by a person, a GitOps re-sync after retention,
// or a restore without status — adopts the outcome instead of moving money
// again.
//
// The records live in ConfigMaps in one namespace (the manager's, not the
// payments': a deleted namespace must not take its ledger with it), sharded
// by the first three hex digits of the identity: paywarden-ledger-000 …
// paywarden-ledger-fff, created when first written, so a read or a write
// moves one small shard. A record is one line of about 90 bytes
// (payment.LedgerRecord.Encode); a shard keeps the records written in the
// last Retention and, past its size budget, drops first the records of
// objects that moved no money, then the oldest. The
// rules (what a record means, when to adopt) are in internal/payment; this
// package only reads and writes.
package ledger

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/internal/payment"
)

// DefaultRetention is how long a record is kept after it was written (its
// object let go): longer than payments are retained (72 h), events redelivered (96 h) and
// any provider remembers an idempotency key (24 h), so every re-apply of a
// retained-away manifest within a month finds it.
const DefaultRetention = 30 * 24 * time.Hour

// MaxShardBytes is a shard's size budget, well below the API server's 1 MiB
// object limit; past it records go, those that moved no money first.
const MaxShardBytes = 256 << 10

// shardDigits is how many hex digits of an identity name its shard.
const shardDigits = 3

// maxPerIdentity bounds the records kept for one identity, as far as
// records of objects that moved no money can be dropped for it.
const maxPerIdentity = 4

// ShardPrefix names the shards: <prefix><3 hex digits>.
const ShardPrefix = "paywarden-ledger-"

// Store is the ledger in the ConfigMaps of one namespace.
type Store struct {
	// Client writes the shards.
	Client client.Client
	// Reader reads them from the API server (the shards are not cached: they
	// are read once per new object and would otherwise cost the manager their
	// whole size in memory).
	Reader    client.Reader
	Namespace string
	// Retention, when positive, replaces DefaultRetention.
	Retention time.Duration
	Clock     clock.PassiveClock
}

func shardName(identity string) (string, error) {
	if len(identity) < shardDigits {
		return "", fmt.Errorf("ledger identity %q is too short", identity)
	}
	return ShardPrefix + strings.ToLower(identity[:shardDigits]), nil
}

// Get returns the records kept for identity, oldest first (none: nil).
func (s *Store) Get(ctx context.Context, identity string) ([]payment.LedgerRecord, error) {
	name, err := shardName(identity)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read ledger shard %s/%s: %w", s.Namespace, name, err)
	}
	e, err := decode(cm.Data[identity])
	if err != nil {
		// A line this manager cannot read (written by a later release, or
		// edited by hand) may be the record that the order took its money:
		// the object waits until it is fixed, rather than move money again.
		return nil, fmt.Errorf("ledger shard %s/%s, identity %s: %w", s.Namespace, name, identity, err)
	}
	return e.recs, nil
}

// Put adds rec to the records of identity (replacing the record of the same
// object, payment.LedgerRecord.Replaces: one per Payment name, one per amount
// a Refund name asked) and prunes the shard.
func (s *Store) Put(ctx context.Context, identity string, rec payment.LedgerRecord) error {
	name, err := shardName(identity)
	if err != nil {
		return err
	}
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		cm := &corev1.ConfigMap{}
		err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cm)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return fmt.Errorf("read ledger shard %s/%s: %w", s.Namespace, name, err)
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name,
				Labels: map[string]string{"app.kubernetes.io/part-of": "paywarden", "app.kubernetes.io/component": "ledger"}}}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		// Lines it cannot read are kept as they are (decode).
		e, _ := decode(cm.Data[identity])
		rec.RecordedAt = s.now()
		kept := e.recs[:0]
		for _, r := range e.recs {
			if !rec.Replaces(r) {
				kept = append(kept, r)
			}
		}
		e.recs = keepPerIdentity(append(kept, rec))
		cm.Data[identity] = e.encode()
		s.prune(cm.Data)
		if create {
			return s.Client.Create(ctx, cm)
		}
		return s.Client.Update(ctx, cm)
	})
}

func (s *Store) now() time.Time {
	if s.Clock != nil {
		return s.Clock.Now()
	}
	return time.Now()
}

// keepPerIdentity bounds the records kept for one identity (the attempts at
// one order, the refunds asked under one Refund name): the oldest records of
// objects that moved no money go; one that moved money is never dropped for
// another's, since forgetting it would let its manifest applied again move
// the money twice. Those are few by nature: one attempt at an order takes
// its money (another is parked as DuplicatePayment), and the refunds of a
// name each asked another amount out of what the payment received. The
// shard's budget (prune) bounds them with everything else.
func keepPerIdentity(recs []payment.LedgerRecord) []payment.LedgerRecord {
	for len(recs) > maxPerIdentity {
		drop := -1
		for i, r := range recs {
			if !r.TookMoney() {
				drop = i
				break
			}
		}
		if drop < 0 {
			return recs
		}
		recs = append(recs[:drop], recs[drop+1:]...)
	}
	return recs
}

// prune drops records written longer than retention ago, then, while the
// shard is over its budget, the orders whose records moved no money, then
// the oldest.
func (s *Store) prune(data map[string]string) {
	keep := s.Retention
	if keep <= 0 {
		keep = DefaultRetention
	}
	now := s.now()
	type budgeted struct {
		key   string
		money bool
		last  time.Time
	}
	var entries []budgeted
	size := 0
	for k, v := range data {
		e, _ := decode(v)
		var fresh []payment.LedgerRecord
		// An unreadable line has no age and may be a record of money
		// taken: it is kept, and goes last when over the budget.
		money, last := len(e.unreadable) > 0, now
		for _, r := range e.recs {
			if now.Sub(r.RecordedAt) < keep {
				fresh = append(fresh, r)
				money = money || r.TookMoney()
			}
		}
		if len(fresh) == 0 && len(e.unreadable) == 0 {
			delete(data, k)
			continue
		}
		if len(e.unreadable) == 0 {
			last = fresh[len(fresh)-1].RecordedAt
		}
		e.recs = fresh
		data[k] = e.encode()
		size += len(k) + len(data[k])
		entries = append(entries, budgeted{k, money, last})
	}
	if size <= MaxShardBytes {
		return
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].money != entries[j].money {
			return !entries[i].money
		}
		return entries[i].last.Before(entries[j].last)
	})
	for _, e := range entries {
		if size <= MaxShardBytes {
			return
		}
		size -= len(e.key) + len(data[e.key])
		delete(data, e.key)
	}
}

// entry is one identity's value in a shard: the records it holds, and the
// lines this manager cannot read (a record of a later format, a line edited
// by hand), which are kept as they are: any of them may be the record that
// the order took its money, and dropping it would let the order be paid
// again.
type entry struct {
	recs       []payment.LedgerRecord
	unreadable []string
}

// decode reads an identity's value; err is the first unreadable line's.
func decode(v string) (entry, error) {
	var e entry
	var first error
	if v == "" {
		return e, nil
	}
	for _, line := range strings.Split(v, "\n") {
		r, err := payment.DecodeRecord(line)
		if err != nil {
			e.unreadable = append(e.unreadable, line)
			if first == nil {
				first = err
			}
			continue
		}
		e.recs = append(e.recs, r)
	}
	return e, first
}

// encode writes the value back: the unreadable lines first, then the
// records, oldest first.
func (e entry) encode() string {
	lines := append([]string(nil), e.unreadable...)
	for _, r := range e.recs {
		lines = append(lines, r.Encode())
	}
	return strings.Join(lines, "\n")
}
