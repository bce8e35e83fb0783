package paymentcache

import (
	"fmt"
	"slices"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"
)

// recorder writes down what a handler is told.
type recorder struct{ heard []string }

func (r *recorder) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.heard = append(r.heard, fmt.Sprint("add ", o)) },
		UpdateFunc: func(old, cur any) { r.heard = append(r.heard, fmt.Sprint("update ", old, " ", cur)) },
		DeleteFunc: func(o any) { r.heard = append(r.heard, fmt.Sprint("delete ", o)) },
	}
}

// A handler subscribed late is handed what the informer holds as added, then
// every change, as one the informer added itself; the handlers subscribed
// before it hear the changes too, and not the hand-over.
func TestAFanoutHandsALateHandlerWhatIsHeldThenEveryChange(t *testing.T) {
	var f fanout
	var early, late recorder
	f.subscribe(early.handler(), func() []any { return nil })
	f.OnAdd("a", true)
	f.OnAdd("b", true)
	f.subscribe(late.handler(), func() []any { return []any{"a", "b"} })
	f.OnUpdate("a", "a2")
	f.OnDelete("b")
	f.OnAdd("c", false)

	if want := []string{"add a", "add b", "update a a2", "delete b", "add c"}; !slices.Equal(early.heard, want) {
		t.Errorf("the early handler heard %q, want %q", early.heard, want)
	}
	if want := []string{"add a", "add b", "update a a2", "delete b", "add c"}; !slices.Equal(late.heard, want) {
		t.Errorf("the late handler heard %q, want %q", late.heard, want)
	}
}
