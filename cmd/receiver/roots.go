package main

// The image has no operating system (an empty base): the providers' HTTPS
// certificates are verified against the Mozilla roots compiled in here,
// used only when the system has none (SSL_CERT_FILE and SSL_CERT_DIR still
// point at a bundle of your own, a private CA's, say).
import _ "golang.org/x/crypto/x509roots/fallback"
