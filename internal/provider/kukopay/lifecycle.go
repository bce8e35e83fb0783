package kukopay

import (
	"context"

	"github.com/paywarden/paywarden/internal/provider"
)

// Authorize is not supported yet.
func (a *Adapter) Authorize(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "authorize")
}

// Capture is not supported yet.
func (a *Adapter) Capture(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "capture")
}

// Cancel is not supported yet.
func (a *Adapter) Cancel(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "cancel")
}

// CreateRefund is not supported yet.
func (a *Adapter) CreateRefund(context.Context, provider.RefundRequest) (provider.Refund, error) {
	return provider.Refund{}, provider.Unsupported(a.c.Name(), "create refund")
}

// GetRefund is not supported yet.
func (a *Adapter) GetRefund(context.Context, string, string) (provider.Refund, error) {
	return provider.Refund{}, provider.Unsupported(a.c.Name(), "get refund")
}

// FindRefund is not supported yet.
func (a *Adapter) FindRefund(context.Context, string, string) (provider.Refund, error) {
	return provider.Refund{}, provider.Unsupported(a.c.Name(), "find refund")
}
