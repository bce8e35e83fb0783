package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/scheme"
	"github.com/paywarden/paywarden/test/harness"
	"github.com/paywarden/paywarden/webhookreceiver"
)

const receiverNS = "bench-receiver"

// receiver compares the receiver with a bare client (the manager is not
// running: only the receiver's own cost is measured), then replays recent
// events as duplicates.
func (b *bench) receiver(ctx context.Context) error {
	cp := b.st.CP
	if err := createNamespace(ctx, cp.Client, receiverNS); err != nil {
		return err
	}
	prov, err := createProvider(ctx, cp.Client, providerSpec{ns: receiverNS, name: "kukopay", apiURL: b.st.Sim.URL + "/kukopay"})
	if err != nil {
		return err
	}
	if err := b.st.StartReceiver(ctx); err != nil {
		return err
	}
	bare, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	url := b.st.ReceiverURL + "/webhooks/" + receiverNS + "/kukopay"

	// batch creates n payments and their events for one run.
	batch := func(kind string, n int) ([][]byte, []*v1alpha1.Payment, error) {
		bodies := make([][]byte, n)
		ps := make([]*v1alpha1.Payment, n)
		now := time.Now()
		for i := range n {
			ref := fmt.Sprintf("%s-%d", kind, i)
			ps[i] = newPayment(receiverNS, ref, "kukopay", ref, "pay_"+ref, nil)
			bodies[i] = kukoPayEvent("evt_"+ref, "pay_"+ref, ref, 1999, "USD", now)
		}
		return bodies, ps, createAll(ctx, cp.Client, ps)
	}
	// settle lets the receiver's cache catch up with new payments and its
	// asynchronous writes finish, so one run does not pay for another.
	settle := func() {
		time.Sleep(2 * time.Second)
		b.waitQuiet(ctx, b.st.ReceiverMetrics, "rest_client_requests_total")
	}

	warm, _, err := batch("warmup", 20)
	if err != nil {
		return err
	}
	settle()
	if r := closedLoop(ctx, receiverSender{url: url, bodies: warm}, len(warm), 4); r.Errors > 0 {
		return fmt.Errorf("warm-up: %d errors, e.g. %s", r.Errors, r.FirstErr)
	}

	var dupBodies [][]byte
	ceiling := 0.0
	for _, senders := range b.opts.Senders {
		n := b.opts.Events
		bareBodies, barePayments, err := batch(fmt.Sprintf("bare-%d", senders), n)
		if err != nil {
			return err
		}
		recvBodies, _, err := batch(fmt.Sprintf("recv-%d", senders), n)
		if err != nil {
			return err
		}
		fullBodies, fullPayments, err := batch(fmt.Sprintf("full-%d", senders), n)
		if err != nil {
			return err
		}
		settle()
		fr := closedLoop(ctx, fullSender{bareSender{c: bare, prov: prov, bodies: fullBodies, payments: fullPayments}}, n, senders)
		cpu := b.startCPU()
		br := closedLoop(ctx, bareSender{c: bare, prov: prov, bodies: bareBodies, payments: barePayments}, n, senders)
		settle()
		bareCPU := cpu.perEvent(n)
		cpu = b.startCPU()
		recvStart := time.Now()
		rr := closedLoop(ctx, receiverSender{url: url, bodies: recvBodies}, n, senders)
		// The receiver's writes after the answer are part of each event's
		// cost, and of its sustained rate: a short run ends with some of
		// them still queued.
		recvDone := b.waitQuiet(ctx, b.st.ReceiverMetrics, "rest_client_requests_total")
		settle()
		recvCPU := cpu.perEvent(n)
		t := Throughput{
			Senders: senders, Events: n, ReceiverPerSec: rr.perSecond(), BarePerSec: br.perSecond(),
			ReceiverP50Ms: harness.Ms(harness.Percentile(rr.Latencies, 0.5)), ReceiverP99Ms: harness.Ms(harness.Percentile(rr.Latencies, 0.99)),
			BareP50Ms: harness.Ms(harness.Percentile(br.Latencies, 0.5)), BareP99Ms: harness.Ms(harness.Percentile(br.Latencies, 0.99)),
			Errors: rr.Errors + br.Errors, FirstError: rr.FirstErr + br.FirstErr,
			ReceiverCPUMs: recvCPU, BareCPUMs: bareCPU,
			FullPerSec: fr.perSecond(), FullP99Ms: harness.Ms(harness.Percentile(fr.Latencies, 0.99)),
			ReceiverSustainedPerSec: float64(n-rr.Errors) / max(recvDone.Sub(recvStart), rr.Elapsed).Seconds(),
		}
		if t.FullPerSec > 0 {
			t.FullRatio = t.ReceiverPerSec / t.FullPerSec
		}
		if t.BarePerSec > 0 {
			t.Ratio = t.ReceiverPerSec / t.BarePerSec
		}
		ceiling = max(ceiling, t.BarePerSec)
		b.res.Throughput = append(b.res.Throughput, t)
		b.logf("closed loop, %d senders: receiver %.0f/s, bare %.0f/s (%.2f), bare with all four writes %.0f/s (%.2f)",
			senders, t.ReceiverPerSec, t.BarePerSec, t.Ratio, t.FullPerSec, t.FullRatio)
		if senders <= 8 || dupBodies == nil {
			dupBodies = recvBodies
		}
	}

	// Open loop at half the bare ceiling: latency when neither is saturated.
	rate := ceiling / 2
	n := max(50, int(rate*b.opts.OpenSeconds))
	bareBodies, barePayments, err := batch("open-bare", n)
	if err != nil {
		return err
	}
	recvBodies, _, err := batch("open-recv", n)
	if err != nil {
		return err
	}
	ackBodies, ackPayments, err := batch("open-acked", n)
	if err != nil {
		return err
	}
	settle()
	br := openLoop(ctx, bareSender{c: bare, prov: prov, bodies: bareBodies, payments: barePayments}, n, rate)
	settle()
	// Queued like the receiver's results: 4 per request it admits, 4 writers.
	acked := newAckedSender(fullSender{bareSender{c: bare, prov: prov, bodies: ackBodies, payments: ackPayments}}, 4*webhookreceiver.DefaultMaxConcurrentRequests, 4)
	ar := openLoop(ctx, acked, n, rate)
	afterFailed := acked.close()
	settle()
	rr := openLoop(ctx, receiverSender{url: url, bodies: recvBodies}, n, rate)
	ol := OpenLoop{
		RatePerSec: rate, Events: n, Errors: br.Errors + rr.Errors + ar.Errors + afterFailed,
		ReceiverP50Ms: harness.Ms(harness.Percentile(rr.Latencies, 0.5)), ReceiverP99Ms: harness.Ms(harness.Percentile(rr.Latencies, 0.99)),
		BareP50Ms: harness.Ms(harness.Percentile(br.Latencies, 0.5)), BareP99Ms: harness.Ms(harness.Percentile(br.Latencies, 0.99)),
		SameWritesP50Ms: harness.Ms(harness.Percentile(ar.Latencies, 0.5)), SameWritesP99Ms: harness.Ms(harness.Percentile(ar.Latencies, 0.99)),
	}
	if ol.BareP99Ms > 0 {
		ol.Ratio = ol.ReceiverP99Ms / ol.BareP99Ms
	}
	if ol.SameWritesP99Ms > 0 {
		ol.SameWritesRatio = ol.ReceiverP99Ms / ol.SameWritesP99Ms
	}
	b.res.OpenLoop = ol
	b.logf("open loop at %.0f/s: receiver p99 %.1f ms, same writes acknowledged after two p99 %.1f ms (%.2f), bare p99 %.1f ms (%.2f)",
		rate, ol.ReceiverP99Ms, ol.SameWritesP99Ms, ol.SameWritesRatio, ol.BareP99Ms, ol.Ratio)

	// Duplicates: every event of one closed-loop run again, recently stored
	// by this very replica.
	settle()
	recvBefore, err := harness.Scrape(ctx, b.st.ReceiverMetrics, "rest_client_requests_total")
	if err != nil {
		return err
	}
	apiBefore, err := cp.APIRequests(ctx)
	if err != nil {
		return err
	}
	dr := closedLoop(ctx, receiverSender{url: url, bodies: dupBodies}, len(dupBodies), 8)
	time.Sleep(time.Second)
	recvAfter, err := harness.Scrape(ctx, b.st.ReceiverMetrics, "rest_client_requests_total")
	if err != nil {
		return err
	}
	apiAfter, err := cp.APIRequests(ctx)
	if err != nil {
		return err
	}
	d := Duplicates{
		Events: len(dupBodies), Senders: 8, Errors: dr.Errors,
		P50Ms: harness.Ms(harness.Percentile(dr.Latencies, 0.5)), P99Ms: harness.Ms(harness.Percentile(dr.Latencies, 0.99)),
		ReceiverRequests:  recvAfter.Sum("rest_client_requests_total", nil) - recvBefore.Sum("rest_client_requests_total", nil),
		APIServerRequests: apiDelta(apiBefore, apiAfter, paywardenObjects),
	}
	d.RequestsPerDuplicate = d.ReceiverRequests / float64(d.Events)
	d.APIRequestsPerDuplicate = d.APIServerRequests / float64(d.Events)
	b.res.Duplicates = d
	b.logf("duplicates: p99 %.1f ms, %.2f receiver requests per duplicate", d.P99Ms, d.RequestsPerDuplicate)

	// Leave nothing for the later phases' manager to list.
	b.st.Receiver.Stop(20 * time.Second)
	return cleanNamespace(ctx, cp.Client, receiverNS)
}

// cleanNamespace deletes the namespace's WebhookEvents and Payments. A
// delete of tens of thousands of objects can outlast the API server's
// request timeout on a loaded machine; what it deleted stays deleted, so it
// is repeated a few times.
func cleanNamespace(ctx context.Context, c client.Client, ns string) error {
	for _, o := range []client.Object{&v1alpha1.WebhookEvent{}, &v1alpha1.Payment{}} {
		var err error
		for attempt := range 5 {
			if err = c.DeleteAllOf(ctx, o, client.InNamespace(ns)); err == nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 2 * time.Second)
		}
		if err != nil {
			return fmt.Errorf("clean %s: %w", ns, err)
		}
	}
	return nil
}

// waitQuiet waits until counter (summed) at a metrics URL stops moving
// (the process has finished its asynchronous work) and returns when it was
// last seen moving.
func (b *bench) waitQuiet(ctx context.Context, url, counter string) time.Time {
	deadline := time.Now().Add(60 * time.Second)
	last, same, moved := -1.0, 0, time.Now()
	for time.Now().Before(deadline) && same < 3 {
		s, err := harness.Scrape(ctx, url, counter)
		if err != nil {
			break
		}
		v := s.Sum(counter, nil)
		if v == last {
			same++
		} else {
			same, moved = 0, time.Now()
		}
		last = v
		time.Sleep(300 * time.Millisecond)
	}
	return moved
}

// paywardenObjects keeps the API server's requests about paywarden's kinds.
func paywardenObjects(l map[string]string) bool {
	return l["group"] == v1alpha1.GroupVersion.Group
}

// apiDelta is the growth of apiserver_request_total over the samples keep accepts.
func apiDelta(before, after harness.Samples, keep func(map[string]string) bool) float64 {
	return after.SumWhere("apiserver_request_total", keep) - before.SumWhere("apiserver_request_total", keep)
}

// cpuMeter measures the CPU time the processes of one run used.
type cpuMeter struct {
	pids   map[string]int
	before map[string]float64
}

// startCPU starts measuring the API server, etcd, the receiver (when
// running) and the benchmark itself (the bare client's writes, the
// receiver's senders).
func (b *bench) startCPU() cpuMeter {
	m := cpuMeter{pids: map[string]int{"bench": os.Getpid()}, before: map[string]float64{}}
	if pid, err := b.st.CP.APIServerPID(); err == nil {
		m.pids["apiserver"] = pid
	}
	if pid, err := b.st.CP.EtcdPID(); err == nil {
		m.pids["etcd"] = pid
	}
	if pid := b.st.Receiver.PID(); pid != 0 {
		m.pids["receiver"] = pid
	}
	for name, pid := range m.pids {
		m.before[name], _ = harness.CPUSeconds(pid)
	}
	return m
}

// perEvent is each process's CPU milliseconds per event since startCPU.
func (m cpuMeter) perEvent(events int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range m.pids {
		if now, err := harness.CPUSeconds(pid); err == nil && events > 0 {
			out[name] = (now - m.before[name]) * 1000 / float64(events)
		}
	}
	return out
}
