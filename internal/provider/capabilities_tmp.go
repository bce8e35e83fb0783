package provider

// Capabilities is what an adapter type needs and can do; controllers read it
// instead of switching on the type.
type Capabilities struct {
	Type              string
	CredentialKeys    []string
	EventsAPI         bool
	LookupByReference bool
	Verification      Verification
}

// Verification is what VerifyWebhook needs.
type Verification struct {
	SigningSecret bool
	Credentials   bool
	WebhookID     bool
	CheckSecret   func([]byte) error
}
