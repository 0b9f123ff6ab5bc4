package etcdstore

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/google/btree"
)

// BenchmarkReplica measures the replica's snapshots (a copy-on-write
// clone of a btree per applied revision) at 10,000 and 100,000 records:
// apply is what the watch goroutine pays per revision of two writes
// (clone, two replacements, publish); get is a read of a snapshot.
func BenchmarkReplica(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		work := btree.NewG(btreeDegree, itemLess)
		val := make([]byte, 200)
		for i := range n {
			work.ReplaceOrInsert(item{key: fmt.Sprintf("machine/m/%06d", i), val: val, mod: 1})
		}
		s := &Store{}
		s.publish(&snapshot{tree: work.Clone()})
		b.Run(fmt.Sprintf("apply/records=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				work.ReplaceOrInsert(item{key: fmt.Sprintf("machine/m/%06d", i%n), val: val, mod: int64(i)})
				work.ReplaceOrInsert(item{key: "meta/x" + strconv.Itoa(i%10), val: val, mod: int64(i)})
				s.publish(&snapshot{tree: work.Clone(), rev: int64(i)})
			}
		})
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = fmt.Sprintf("machine/m/%06d", i*n/len(keys))
		}
		b.Run(fmt.Sprintf("get/records=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				r := reader{snap: s.snap.Load()}
				if _, ok, _ := r.Get(keys[i%len(keys)]); !ok {
					b.Fatal("missing")
				}
			}
		})
	}
}
