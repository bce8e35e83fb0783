package soak

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// reapply deletes the payments and Refunds marked Reapply once they have
// settled and, once an object is gone (remembered in the ledger, the
// finalizer removed), creates it again from the same manifest: what a GitOps
// re-sync or a person does after a delete. Deletes come in waves, each just
// before a chaos action that concerns them (a kill of the leader, the API
// server stopped, the API server back with the managers restarting) so that
// deletes, ledger writes, re-creates and adoptions meet them; after the last
// wave (the leader's kill at the end of the window) every candidate is
// deleted as soon as it has settled. A re-apply counts as done once the
// create was stored.
//
// What is left is given up (and fails the soak) once nothing has moved for
// reapplyStall after the window, or at the latest reapplyMax after it: a
// deadline fixed after the window would fail a larger N, or a loaded
// machine, whose deletes wait behind the leader's kills and the backlog.
func (s *soak) reapply(ctx context.Context) {
	deleting := false // a wave is on: delete what has settled
	lastWave := s.start.Add(s.window - time.Second)
	moved, lastMove := -1, time.Now()
	for ctx.Err() == nil {
		s.mu.Lock()
		all := len(s.payments) == s.n
		var pays []*planned
		var refunds []*plannedRefund
		steps := 0 // deletes and re-creates done so far
		for _, p := range s.payments {
			steps += doneSteps(p.Deleted, p.Reapplied)
			if p.Reapply && p.Reapplied.IsZero() && p.ReapplyErr == "" {
				pays = append(pays, p)
			}
			for _, r := range p.Refunds {
				steps += doneSteps(r.Deleted, r.Reapplied)
				if r.Reapply && r.Reapplied.IsZero() && r.ReapplyErr == "" {
					refunds = append(refunds, r)
				}
			}
		}
		s.mu.Unlock()
		if all && len(pays) == 0 && len(refunds) == 0 {
			return
		}
		if steps != moved {
			moved, lastMove = steps, time.Now()
		}
		if deadline := s.reapplyDeadline(lastMove); time.Now().After(deadline) {
			s.mu.Lock()
			for _, p := range pays {
				p.ReapplyErr = fmt.Sprintf("not re-applied by %s (deleted: %v)", deadline.Sub(s.start).Round(time.Second), !p.Deleted.IsZero())
			}
			for _, r := range refunds {
				r.ReapplyErr = fmt.Sprintf("not re-applied by %s (created: %v, deleted: %v)", deadline.Sub(s.start).Round(time.Second), !r.Created.IsZero(), !r.Deleted.IsZero())
			}
			s.mu.Unlock()
			s.logf("re-apply: %d payments and %d Refunds not re-applied before the deadline", len(pays), len(refunds))
			return
		}
		wave := deleting || !time.Now().Before(lastWave)
		for _, p := range pays {
			s.reapplyPayment(ctx, p, wave)
		}
		for _, r := range refunds {
			s.reapplyRefund(ctx, r, wave)
		}
		deleting = false
		select {
		case <-ctx.Done():
		case why := <-s.waves:
			s.logf("re-apply: deleting the settled ones now (%s)", why)
			deleting = true
		case <-time.After(time.Second):
		}
	}
}

// The re-apply's patience after the window: what is left is given up once
// nothing has been deleted or re-created for reapplyStall, and at
// reapplyMax at the latest.
const (
	reapplyStall = 2 * time.Minute
	reapplyMax   = 6 * time.Minute
)

// reapplyDeadline is when the re-apply gives up, its last step done at
// lastMove.
func (s *soak) reapplyDeadline(lastMove time.Time) time.Time {
	end := s.start.Add(s.window)
	if lastMove.Before(end) {
		lastMove = end
	}
	if d := lastMove.Add(reapplyStall); d.Before(end.Add(reapplyMax)) {
		return d
	}
	return end.Add(reapplyMax)
}

func doneSteps(deleted, reapplied time.Time) int {
	n := 0
	for _, t := range []time.Time{deleted, reapplied} {
		if !t.IsZero() {
			n++
		}
	}
	return n
}

// reapplyPayment takes one payment one step: delete it in a wave once
// settled, create it again once gone.
func (s *soak) reapplyPayment(ctx context.Context, p *planned, wave bool) {
	c := s.st.CP.Client
	key := client.ObjectKey{Namespace: namespace, Name: p.Name}
	obj := &v1alpha1.Payment{}
	err := c.Get(ctx, key, obj)
	if p.Deleted.IsZero() {
		if !wave {
			return
		}
		switch {
		case err == nil && obj.DeletionTimestamp != nil:
			// The delete was stored and its answer lost.
		case err == nil:
			if !payment.Settled(obj) {
				return
			}
			first := obj.DeepCopy()
			uid := obj.UID
			if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				return // the API server may be away: again next round
			}
			s.set(func() { p.First = first })
		case apierrors.IsNotFound(err) && p.First != nil:
			// Deleted and already let go; the answer was lost.
		default:
			return
		}
		s.set(func() { p.Deleted = time.Now() })
		s.logf("re-apply: deleted %s (%s, %s, provider id %s)", p.Name, p.Provider, p.First.Status.Phase, p.First.Status.ProviderPaymentID)
		return
	}
	if !apierrors.IsNotFound(err) {
		return // still held by its finalizer, or the API server is away
	}
	if err := c.Create(ctx, p.manifest()); err != nil && !apierrors.IsAlreadyExists(err) {
		return
	}
	s.set(func() { p.Reapplied = time.Now() })
	s.logf("re-apply: %s applied again from its manifest, %.1fs after its delete", p.Name, p.Reapplied.Sub(p.Deleted).Seconds())
}

// reapplyRefund does the same for a Refund: deleted in a wave once it
// succeeded, created again from its manifest once gone.
func (s *soak) reapplyRefund(ctx context.Context, r *plannedRefund, wave bool) {
	if r.Created.IsZero() {
		return
	}
	c := s.st.CP.Client
	key := client.ObjectKey{Namespace: namespace, Name: r.Name}
	obj := &v1alpha1.Refund{}
	err := c.Get(ctx, key, obj)
	if r.Deleted.IsZero() {
		if !wave {
			return
		}
		switch {
		case err == nil && obj.DeletionTimestamp != nil:
		case err == nil:
			if obj.Status.Phase != v1alpha1.RefundSucceeded {
				return
			}
			first := obj.DeepCopy()
			uid := obj.UID
			if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				return
			}
			s.set(func() { r.First = first })
		case apierrors.IsNotFound(err) && r.First != nil:
		default:
			return
		}
		s.set(func() { r.Deleted = time.Now() })
		s.logf("re-apply: deleted Refund %s (%s, provider refund %s)", r.Name, r.First.Status.Phase, r.First.Status.ProviderRefundID)
		return
	}
	if !apierrors.IsNotFound(err) {
		return
	}
	if err := c.Create(ctx, r.manifest()); err != nil && !apierrors.IsAlreadyExists(err) {
		return
	}
	got := s.getRefund(ctx, key)
	s.set(func() {
		r.Reapplied = time.Now()
		if got != nil {
			r.UIDs = append(r.UIDs, got.UID)
		}
	})
	s.logf("re-apply: Refund %s applied again from its manifest, %.1fs after its delete", r.Name, r.Reapplied.Sub(r.Deleted).Seconds())
}

func TestReapplyGivesUpOnlyWhenNothingMoves(t *testing.T) {
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s := &soak{start: start, window: time.Minute}
	end := start.Add(time.Minute)
	for _, c := range []struct {
		name     string
		lastMove time.Time
		want     time.Time
	}{
		{"a step during the window: the stall counts from its end", start.Add(10 * time.Second), end.Add(reapplyStall)},
		{"a step after the window moves the deadline", end.Add(time.Minute), end.Add(time.Minute + reapplyStall)},
		{"steps go on: capped", end.Add(reapplyMax), end.Add(reapplyMax)},
		{"just under the cap", end.Add(reapplyMax - reapplyStall - time.Second), end.Add(reapplyMax - time.Second)},
	} {
		if got := s.reapplyDeadline(c.lastMove); !got.Equal(c.want) {
			t.Errorf("%s: deadline %s after the window, want %s", c.name, got.Sub(end), c.want.Sub(end))
		}
	}
}
