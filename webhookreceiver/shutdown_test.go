package webhookreceiver_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/webhookreceiver"
)

// gate holds the inbox write until released, so a request is in flight
// while the server shuts down.
type gate struct {
	client.Client
	entered, release chan struct{}
}

func (g *gate) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1alpha1.WebhookEvent); ok {
		close(g.entered)
		<-g.release
	}
	return g.Client.Create(ctx, obj, opts...)
}

// Shutting down stops new connections but finishes the request in flight: the
// provider gets its 200 and the event is stored and applied.
func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-drain", "order-drain", "pay_drain", 100)
	g := &gate{Client: rcv.Client, entered: make(chan struct{}), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webhookreceiver.New(webhookreceiver.Options{Client: g, Reader: rcv.Cache, APIReader: env.Client, BundleNamespace: fixture.BundleNamespace,
		Listener: ln, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start(ctx) }()

	answered := k.deliverInBackground(t, "http://"+ln.Addr().String(), k.event("evt_drain", "payment.succeeded", "succeeded", p))
	<-g.entered
	stop()
	// New connections are refused once shutdown began.
	fixture.Eventually(t, fixture.Timeout, "the listener to refuse new connections", func() (bool, string) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err == nil {
			c.Close()
			return false, "listener still accepting"
		}
		return true, ""
	})
	close(g.release)
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("in-flight request got %d during shutdown, want 200", code)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("payment %s, want the drained request applied", got.Status.Phase)
	}
}
