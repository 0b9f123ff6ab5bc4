package rpc

import (
	"encoding/json"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

// BenchmarkDecodeEntities decodes an agent's Life params: through the
// decoder Handle uses for params.Entities (the fast path) and through
// encoding/json.
func BenchmarkDecodeEntities(b *testing.B) {
	raw := json.RawMessage(`{"entities":[{"tag":"machine-42"}]}`)
	decodeParams := decoder[params.Entities]()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e params.Entities
			if err := decodeParams(raw, &e); err != nil || len(e.Entities) != 1 {
				b.Fatal(e, err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e params.Entities
			if err := json.Unmarshal(raw, &e); err != nil || len(e.Entities) != 1 {
				b.Fatal(e, err)
			}
		}
	})
}
