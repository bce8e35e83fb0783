package main

import (
	"strings"
	"testing"
)

func TestRunFlags(t *testing.T) {
	if err := run([]string{"--help"}); err != nil {
		t.Fatalf("--help: %v", err)
	}
	if err := run([]string{"--default-outcome", "explode"}); err == nil {
		t.Fatal("unknown outcome accepted")
	}
	if err := run([]string{"--no-such-flag"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
	if err := run([]string{"--fault-operations", "capture,teleport"}); err == nil || !strings.Contains(err.Error(), "teleport") {
		t.Fatalf("unknown fault operation: %v", err)
	}
	if err := run([]string{"--default-outcome", "approve", "--fault-operations", "capture,refund", "--addr", "256.0.0.1:-1"}); err == nil || strings.Contains(err.Error(), "--") {
		t.Fatalf("lifecycle flags must be accepted (and the bad address refused): %v", err)
	}
}
