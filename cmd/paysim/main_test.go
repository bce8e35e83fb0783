package main

import "testing"

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
}
