package inbox

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// Store's create is the dedup, and what the API server answers decides what
// the receiver answers: AlreadyExists is a duplicate (no error), an invalid
// object or request can never be stored (ErrInvalidEvent: 400, no retry),
// anything else is retried later (503).
func TestStoreClassifiesTheCreate(t *testing.T) {
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "webhookevents"}
	for _, tc := range []struct {
		name        string
		create      error // nil: the create goes through
		stored      bool
		wantErr     bool
		wantInvalid bool
	}{
		{"a new event is stored", nil, true, false, false},
		{"a copy already stored is a duplicate, not an error", apierrors.NewAlreadyExists(gr, "evt"), false, false, false},
		{"an object the API server finds invalid can never be stored", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "WebhookEvent"}, "evt",
			field.ErrorList{field.TooLong(field.NewPath("spec", "eventID"), "", 512)}), false, true, true},
		{"a request the API server cannot read can never be stored", apierrors.NewBadRequest("bad"), false, true, true},
		{"an API server that is not there is asked again later", apierrors.NewServiceUnavailable("down"), false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := newFakeInbox(t)
			in.Client = interceptor.NewClient(fakeAPI(t), interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if tc.create != nil {
						return tc.create
					}
					return c.Create(ctx, obj, opts...)
				},
			})
			ev := provider.Event{ID: "evt-1", Type: "payment.succeeded", Raw: []byte(`{"id":"evt-1"}`)}
			evt, stored, err := in.Store(context.Background(), testProvider, ev, v1alpha1.ViaWebhook, "kukopay")
			if stored != tc.stored || (evt != nil) != tc.stored {
				t.Errorf("stored %v, event %v, want stored %v", stored, evt != nil, tc.stored)
			}
			if (err != nil) != tc.wantErr || errors.Is(err, ErrInvalidEvent) != tc.wantInvalid {
				t.Fatalf("err %v, want error %v, ErrInvalidEvent %v", err, tc.wantErr, tc.wantInvalid)
			}
			if err != nil && !errors.Is(err, tc.create) {
				t.Errorf("err %v does not carry the API server's answer %v", err, tc.create)
			}
		})
	}
}

// Receive answers a repeated delivery of an event this process stored, or
// found stored, as a duplicate without asking the API server again; the
// memory is per namespace, like the records.
func TestReceiveAnswersARecentDuplicateWithoutTheAPIServer(t *testing.T) {
	ctx := context.Background()
	in, _ := newFakeInbox(t)
	api := fakeAPI(t)
	creates := 0
	in.Client = interceptor.NewClient(api, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			return c.Create(ctx, obj, opts...)
		},
	})
	in.Recent = NewRecentEvents(8)
	ev := func(id string) provider.Event {
		return provider.Event{ID: id, Type: "customer.created", Raw: []byte(`{"id":"` + id + `"}`)}
	}
	other := testProvider.DeepCopy()
	other.Namespace = "other-shop"
	// Another replica stored evt-2.
	evt2, err := NewEvent(testProvider, ev("evt-2"), v1alpha1.ViaWebhook, "kukopay", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Create(ctx, evt2); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		name    string
		prov    *v1alpha1.PaymentProvider
		id      string
		stored  bool
		creates int
	}{
		{"a new event is stored", testProvider, "evt-1", true, 1},
		{"its repeated delivery is a duplicate, without a create", testProvider, "evt-1", false, 1},
		{"the same id of a provider of the same name in another namespace is another event", other, "evt-1", true, 2},
		{"an event another replica stored is a duplicate the API server tells", testProvider, "evt-2", false, 3},
		{"and then one remembered", testProvider, "evt-2", false, 3},
	} {
		out, err := in.Receive(ctx, step.prov, ev(step.id), v1alpha1.ViaWebhook, "kukopay", 0)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, step.name, err)
		}
		if out.Stored != step.stored || (!out.Stored && out.Result != v1alpha1.ResultDuplicate) || creates != step.creates {
			t.Errorf("step %d (%s): stored %v, result %s, %d creates; want stored %v, %d creates", i, step.name, out.Stored, out.Result, creates, step.stored, step.creates)
		}
	}
}
