// Package soak is paywarden's chaos soak (`make soak`, docs/soak.md): N
// payments over every provider type, with scripted outcomes, against paysim
// injecting webhook and API faults, while the manager and the receiver are
// killed with SIGKILL, the API server is stopped for a third of the creation
// window and the provider has an outage. Afterwards it checks invariants against paysim's record of
// what the provider decided and the objects in the API server.
//
// It is a Go test that runs only when PAYWARDEN_SOAK=1, so `go test ./...`
// (make test) compiles and vets it but does not run it.
package soak
