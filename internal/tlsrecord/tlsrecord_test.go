package tlsrecord_test

import (
	"testing"

	"github.com/provisiond/provisiond/internal/tlsrecord"
)

// TestCounterSplitsAnywhere: records of 0, 3 and 300 bytes, fed in every
// chunk size, count 3.
func TestCounterSplitsAnywhere(t *testing.T) {
	var stream []byte
	for _, n := range []int{0, 3, 300} {
		stream = append(stream, 23, 3, 3, byte(n>>8), byte(n))
		stream = append(stream, make([]byte, n)...)
	}
	for chunk := 1; chunk <= len(stream); chunk++ {
		var c tlsrecord.Counter
		for b := stream; len(b) > 0; {
			n := min(chunk, len(b))
			c.Add(b[:n])
			b = b[n:]
		}
		if c.Records() != 3 {
			t.Fatalf("chunks of %d: %d records, want 3", chunk, c.Records())
		}
	}
}
