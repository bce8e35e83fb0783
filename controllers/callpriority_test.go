package controllers

import (
	"testing"

	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/payment"
)

// Only a status query on its schedule waits behind other calls; the look-up
// of an operation's outcome is part of the money call it looks up.
func TestCallPriority(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action    payment.Action
		scheduled bool
		want      gateway.Priority
	}{
		{payment.Query, true, gateway.Scheduled},
		{payment.Query, false, gateway.Money},
		{payment.Create, false, gateway.Money},
		{payment.Lookup, false, gateway.Money},
		{payment.CallAuthorize, false, gateway.Money},
		{payment.CallCapture, false, gateway.Money},
		{payment.CallCancel, false, gateway.Money},
	}
	for _, tc := range cases {
		if got := callPriority(tc.action, tc.scheduled); got != tc.want {
			t.Errorf("%s (scheduled %v): %s, want %s", tc.action, tc.scheduled, got, tc.want)
		}
	}
}
