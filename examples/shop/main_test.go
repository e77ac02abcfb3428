package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The store the README's command line session reads is written, and shop
// never writes into a directory that holds something.
func TestShop(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shop")
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err == nil {
		t.Fatal("a second run wrote into the existing store")
	}
	if _, err := os.Stat(filepath.Join(dir, "TIPKV")); err != nil {
		t.Fatal(err)
	}
}
