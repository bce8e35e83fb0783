// Package helm holds the tests of charts/paywarden (hack/helmgen writes it
// from config/): rendered with the Helm library, the chart with default
// values is what `make deploy` applies, its values change what they say,
// and installed server-side on an API server it runs paywarden (the deploy
// test's proof, test/deploy).
package helm
