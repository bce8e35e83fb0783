package harness

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LeaderLease is paywarden's leader-election Lease (cmd/manager's
// LeaderElectionID) in namespace.
func LeaderLease(namespace string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: "manager.paywarden.dev"}
}

// Holder is a Lease's holder as the API server has it.
type Holder struct {
	Identity string
	// Renewed is when the holder last renewed; Valid whether that is
	// within the lease's duration (a holder that died keeps the Lease
	// until then).
	Renewed     time.Time
	Valid       bool
	Transitions int32
}

// LeaseHolder reads the Lease.
func (cp *ControlPlane) LeaseHolder(ctx context.Context, key client.ObjectKey) (Holder, error) {
	var l coordinationv1.Lease
	if err := cp.Client.Get(ctx, key, &l); err != nil {
		return Holder{}, err
	}
	var h Holder
	if id := l.Spec.HolderIdentity; id != nil {
		h.Identity = *id
	}
	if t := l.Spec.LeaseTransitions; t != nil {
		h.Transitions = *t
	}
	if r := l.Spec.RenewTime; r != nil {
		h.Renewed = r.Time
		d := 15 * time.Second
		if s := l.Spec.LeaseDurationSeconds; s != nil {
			d = time.Duration(*s) * time.Second
		}
		h.Valid = h.Identity != "" && time.Since(h.Renewed) < d
	}
	return h, nil
}

// Leads reports whether the manager whose /metrics is at metricsURL says it
// holds the leader lease (controller-runtime's leader_election_master_status).
func Leads(ctx context.Context, metricsURL string) (bool, error) {
	s, err := Scrape(ctx, metricsURL, "leader_election_master_status")
	if err != nil {
		return false, err
	}
	return s.Sum("leader_election_master_status", map[string]string{"name": LeaderLease("").Name}) == 1, nil
}

// Leader is the manager holding the Lease: the Lease has a holder that
// renewed within its duration, and exactly one running manager says it is
// the one. ok is false while nobody leads (a handover, the API server
// away).
func (s *Stack) Leader(ctx context.Context, lease client.ObjectKey) (p *Proc, h Holder, ok bool, err error) {
	h, err = s.CP.LeaseHolder(ctx, lease)
	if err != nil || !h.Valid {
		return nil, h, false, err
	}
	var leaders []*Proc
	for i, m := range s.Managers {
		if !m.Running() {
			continue
		}
		if leads, err := Leads(ctx, s.ManagersMetrics[i]); err == nil && leads {
			leaders = append(leaders, m)
		}
	}
	switch len(leaders) {
	case 0:
		return nil, h, false, nil
	case 1:
		return leaders[0], h, true, nil
	}
	return nil, h, false, fmt.Errorf("%d managers say they lead the lease held by %s", len(leaders), h.Identity)
}
