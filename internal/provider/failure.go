package provider

// FailureAuthorizationExpired is the Payment.FailureCode (and Event.FailureCode) of an
// authorization that expired before the merchant captured it: Status is Expired, no
// money moved. Adapters use this one value whatever their provider calls it (PayPal
// authorization EXPIRED, KukoPay cancellation_reason "authorization_expired"), so the
// core can record the reason AuthorizationExpired without knowing the provider.
const FailureAuthorizationExpired = "AuthorizationExpired"
