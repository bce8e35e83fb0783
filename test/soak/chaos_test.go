package soak

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/test/harness"
)

// leaderTerm is a Lease holder as the soak saw it.
type leaderTerm struct {
	Identity string    `json:"identity"`
	Manager  string    `json:"manager,omitempty"` // "manager-2:4242": the process that said it led
	From     time.Time `json:"from"`
}

// kill is one kill of the leader.
type kill struct {
	At       time.Time `json:"at"`
	Manager  string    `json:"manager"`
	Identity string    `json:"leaseHolder"`
	// Captures made as it died: let through to the provider after its
	// death (executed) or lost with it.
	Executed, Lost []string
}

// gateFigures are what the targeted gates did.
type gateFigures struct {
	holds []heldFor
}

type heldFor struct {
	r *plannedRefund
	h *harness.Held
}

// apiServerAway is how long the API server is stopped: a third of the
// window (20 s at the CI size), far longer than the Lease (both managers
// lose it and crash-loop until it is back).
func (s *soak) apiServerAway() time.Duration { return s.window / 3 }

// outageFor is how long the provider answers every call with 500: a quarter of
// the window (15 s at the CI size), longer than the circuit breaker stays
// open, so its probe fails and it opens again.
func (s *soak) outageFor() time.Duration { return s.window / 4 }

// playChaos runs the chaos timeline, scaled to the window: kills of the
// leader while payments are being created and settled (the capture calls
// it has just sent go out as it dies), of the receiver, the API server away
// for a third of the window, a provider outage with kills in the middle of
// it, and kills at the end. A killed process is restarted by its supervisor
// after 1 s (as a standby: the other manager takes the Lease once it
// expires).
func (s *soak) playChaos(ctx context.Context) {
	at := func(frac float64) {
		if d := time.Until(s.start.Add(time.Duration(frac * float64(s.window)))); d > 0 {
			time.Sleep(d)
		}
	}
	killProc := func(p *harness.Proc) {
		// A process in a crash loop (its API server was away) is killed
		// once it runs again.
		for i := 0; i < 100 && p.PID() == 0; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		pid := p.PID()
		if err := p.Kill(); err != nil {
			s.t.Errorf("kill %s: %v", p.Name, err)
		}
		s.note("kill -9 %s (pid %d); its supervisor restarts it after 1s", p.Name, pid)
	}
	// wave lets the re-apply loop delete its settled payments and Refunds
	// half a second before the chaos action at frac.
	wave := func(frac float64, why string) {
		at(frac - 0.5/s.window.Seconds())
		select {
		case s.waves <- why:
		default:
		}
		at(frac)
	}
	wave(0.10, "leader kill in 0.5s")
	s.killLeader(ctx)
	at(0.18)
	killProc(s.st.Receiver)
	wave(0.26, "kube-apiserver stop in 0.5s")
	s.note("kube-apiserver stopped for %s (etcd keeps running)", s.apiServerAway())
	from := time.Now()
	if err := s.st.CP.RestartAPIServer(ctx, s.apiServerAway()); err != nil {
		s.t.Errorf("restart kube-apiserver: %v", err)
	} else {
		s.note("kube-apiserver ready again, %s after it was stopped", time.Since(from).Round(100*time.Millisecond))
		s.waves <- "kube-apiserver back, the managers restarting"
	}
	s.mu.Lock()
	s.apiDown = append(s.apiDown, window{from, time.Now()})
	s.mu.Unlock()
	at(0.70)
	s.note("provider outage: every API call answered 500 for %s", s.outageFor())
	out := background
	out.ServerErrorRate, out.TooManyRequestsRate, out.LostResponseRate, out.SlowRate = 1, 0, 0, 0
	from = time.Now()
	if err := s.st.Sim.SetFaults(ctx, out); err != nil {
		s.t.Error(err)
	}
	time.Sleep(4500 * time.Millisecond)
	select {
	case s.waves <- "leader and receiver kill in 0.5s":
	default:
	}
	time.Sleep(500 * time.Millisecond)
	s.killLeader(ctx)
	killProc(s.st.Receiver)
	time.Sleep(time.Until(from.Add(s.outageFor())))
	if err := s.st.Sim.SetFaults(ctx, background); err != nil {
		s.t.Error(err)
	}
	s.mu.Lock()
	s.outage = append(s.outage, window{from, time.Now()})
	s.mu.Unlock()
	s.note("provider outage over")
	at(0.90)
	killProc(s.st.Receiver)
	wave(1.00, "leader kill in 0.5s; from now on as soon as they settle")
	s.killLeader(ctx)
	// The captures meant to meet a kill that were not Authorized at any of
	// the kills above meet one more, once they all are (or 30 s on).
	deadline := time.Now().Add(30 * time.Second)
	waiting, ready := s.capturesWaitingForKill(ctx)
	for waiting > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		waiting, ready = s.capturesWaitingForKill(ctx)
	}
	if ready > 0 {
		s.killLeader(ctx)
	}
	s.set(func() { s.killsDone = true })
	time.Sleep(leaseDuration + 2*retryPeriod)
}

// capturesWaitingForKill counts the CaptureAtKill payments not captured
// yet: those not Authorized yet, and those ready for their capture.
func (s *soak) capturesWaitingForKill(ctx context.Context) (waiting, ready int) {
	for _, p := range s.snapshot() {
		if p.Story != CaptureAtKill || !p.Annotated.IsZero() {
			continue
		}
		pay := &v1alpha1.Payment{}
		if err := s.st.CP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Name}, pay); err == nil && pay.Status.Phase == v1alpha1.PhaseAuthorized {
			ready++
		} else {
			waiting++
		}
	}
	return waiting, ready
}

// killLeader kills the manager holding the Lease (waiting for one, up to a
// lease and a half). Just before, it asks for the capture of the payments
// waiting to be captured as a leader dies, and holds back the capture calls
// the leader sends for them; after the kill a part of them go through to
// the provider (executed: the manager died between the call and its answer)
// and the rest never reach it (lost with the manager). The webhooks about
// the executed ones are refused until the next leader has taken over, so it
// is the next leader that finds out what happened.
func (s *soak) killLeader(ctx context.Context) {
	var leader *harness.Proc
	var holder harness.Holder
	deadline := time.Now().Add(leaseDuration * 3 / 2)
	for {
		p, h, ok, err := s.st.Leader(ctx, harness.LeaderLease(harness.SystemNamespace))
		if ok {
			leader, holder = p, h
			break
		}
		if time.Now().After(deadline) {
			s.note("no leader to kill after %s (lease holder %q, %v)", leaseDuration*3/2, h.Identity, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	holds := s.captureAsLeaderDies(ctx)
	pid := leader.PID()
	if err := leader.Kill(); err != nil {
		s.t.Errorf("kill %s: %v", leader.Name, err)
	}
	k := kill{At: time.Now(), Manager: fmt.Sprintf("%s:%d", leader.Name, pid), Identity: holder.Identity}
	var executedIDs []string
	for i, h := range holds {
		execute := i%3 != 2
		h.held.Release(execute)
		switch {
		case h.held.Caught() == 0:
			continue // the capture was not sent before the kill: it met no kill
		case execute:
			k.Executed = append(k.Executed, h.p.Name)
			executedIDs = append(executedIDs, h.ids...)
			s.set(func() { h.p.AtKill = "executed" })
		default:
			k.Lost = append(k.Lost, h.p.Name)
			s.set(func() { h.p.AtKill = "lost" })
		}
	}
	s.mu.Lock()
	s.kills = append(s.kills, k)
	s.mu.Unlock()
	s.note("kill -9 leader %s (lease holder %s); capture calls it sent: %d let through after its death %v, %d lost with it %v",
		k.Manager, holder.Identity, len(k.Executed), k.Executed, len(k.Lost), k.Lost)
	if len(executedIDs) > 0 {
		stop := s.hookRec.Refuse(func(_ *http.Request, body []byte) bool {
			for _, id := range executedIDs {
				if strings.Contains(string(body), id) {
					return true
				}
			}
			return false
		}, http.StatusServiceUnavailable)
		go func() {
			defer stop()
			deadline := time.Now().Add(3 * leaseDuration)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, h, ok, _ := s.st.Leader(ctx, harness.LeaderLease(harness.SystemNamespace)); ok && h.Identity != holder.Identity {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			sleep(ctx, 3*time.Second)
		}()
	}
}

type captureHold struct {
	p    *planned
	held *harness.Held
	ids  []string // the provider's ids of the payment (and its authorization)
}

// captureAsLeaderDies annotates the CaptureAtKill payments that are
// Authorized now and holds back their capture calls; it waits (up to 2 s)
// until the leader has sent them.
func (s *soak) captureAsLeaderDies(ctx context.Context) []captureHold {
	var holds []captureHold
	for _, p := range s.snapshot() {
		if p.Story != CaptureAtKill || !p.Annotated.IsZero() {
			continue
		}
		pay := &v1alpha1.Payment{}
		if err := s.st.CP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Name}, pay); err != nil ||
			pay.Status.Phase != v1alpha1.PhaseAuthorized || pay.Status.Operation != nil {
			continue
		}
		view, ok := s.simPayment(ctx, p.Provider, pay.Status.ProviderPaymentID)
		if !ok {
			continue
		}
		ids := []string{view.ID}
		if a := view.Authorization; a != nil && a.ID != "" {
			ids = append(ids, a.ID)
		}
		h := s.provRec.Hold(func(req *http.Request, _ []byte) bool {
			if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/capture") {
				return false
			}
			for _, id := range ids {
				if strings.Contains(req.URL.Path, "/"+id+"/") {
					return true
				}
			}
			return false
		}, time.Minute)
		if !s.annotate(ctx, p, map[string]string{v1alpha1.AnnotationCapture: "all"}) {
			h.Release(true)
			continue
		}
		holds = append(holds, captureHold{p: p, held: h, ids: ids})
	}
	// The manager gives up on a call after its provider's timeout (3 s):
	// the kill comes before.
	deadline := time.Now().Add(2 * time.Second)
	for _, h := range holds {
		h.held.WaitCaught(1, time.Until(deadline))
	}
	return holds
}

// watchLeader records every Lease holder and the manager that led under it.
func (s *soak) watchLeader(ctx context.Context) {
	lease := harness.LeaderLease(harness.SystemNamespace)
	for ctx.Err() == nil {
		p, h, ok, _ := s.st.Leader(ctx, lease)
		if h.Identity != "" {
			s.mu.Lock()
			n := len(s.leaders)
			if n == 0 || s.leaders[n-1].Identity != h.Identity {
				s.leaders = append(s.leaders, leaderTerm{Identity: h.Identity, From: time.Now()})
				n++
			}
			if ok && s.leaders[n-1].Manager == "" {
				s.leaders[n-1].Manager = fmt.Sprintf("%s:%d", p.Name, p.PID())
			}
			s.mu.Unlock()
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// manualActions asks for the captures and cancels of the manual stories
// once paywarden shows the payment Authorized: capture all, a part, cancel,
// or capture and cancel in one change (which wins is the provider's). The
// captures meant to meet a leader kill wait for one (killLeader), and are
// asked for at once after the last.
func (s *soak) manualActions(ctx context.Context) {
	for ctx.Err() == nil {
		s.mu.Lock()
		killsDone := s.killsDone
		s.mu.Unlock()
		for _, p := range s.snapshot() {
			if !p.Story.manual() || !p.Annotated.IsZero() || (p.Story == CaptureAtKill && !killsDone) {
				continue
			}
			pay := &v1alpha1.Payment{}
			if err := s.st.CP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Name}, pay); err != nil ||
				pay.Status.Phase != v1alpha1.PhaseAuthorized {
				continue
			}
			cancel := "soak: the order was withdrawn"
			var ann map[string]string
			switch p.Story {
			case CaptureAll, CaptureAtKill:
				ann = map[string]string{v1alpha1.AnnotationCapture: "all"}
			case CapturePartial:
				ann = map[string]string{v1alpha1.AnnotationCapture: fmt.Sprint(p.Capture)}
			case Cancel:
				ann = map[string]string{v1alpha1.AnnotationCancel: cancel}
			case CancelRacesCapture:
				ann = map[string]string{v1alpha1.AnnotationCapture: "all", v1alpha1.AnnotationCancel: cancel}
			}
			s.annotate(ctx, p, ann)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// annotate sets the annotations on p's Payment (a merge patch of metadata
// only, as kubectl annotate does).
func (s *soak) annotate(ctx context.Context, p *planned, ann map[string]string) bool {
	pay := &v1alpha1.Payment{}
	if err := s.st.CP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Name}, pay); err != nil {
		return false
	}
	base := pay.DeepCopy()
	if pay.Annotations == nil {
		pay.Annotations = map[string]string{}
	}
	for k, v := range ann {
		pay.Annotations[k] = v
	}
	if err := s.st.CP.Client.Patch(ctx, pay, client.MergeFrom(base)); err != nil {
		return false
	}
	s.set(func() { p.Annotated = time.Now() })
	return true
}
