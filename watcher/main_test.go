package watcher_test

import (
	"testing"

	"github.com/provisiond/provisiond/internal/leaktest"
)

// TestMain fails the run if the tests leave goroutines behind. Package
// watcher starts none of its own (style §6.6): this guards that, and that
// every goroutine a test starts also ends.
func TestMain(m *testing.M) { leaktest.Main(m) }
