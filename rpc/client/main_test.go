package client_test

import (
	"testing"

	"github.com/provisiond/provisiond/internal/leaktest"
)

// TestMain fails the test binary when a goroutine of ours outlives the
// tests: the Conns' readers and pingers, the watches' goroutines, the
// daemons the examples and tests start.
func TestMain(m *testing.M) { leaktest.Main(m) }
