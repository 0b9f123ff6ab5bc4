package state_test

import (
	"testing"

	"github.com/provisiond/provisiond/state"
)

// mem and root-disk are read by package size, as storage and disks are:
// 1G, 1GiB, 1GB and 1024M are one size.
func TestConstraintSizesAreOneParser(t *testing.T) {
	for _, v := range []string{"1G", "1GiB", "1GB", "1024M", "1024", ".0009765625T"} {
		c, err := state.ParseConstraints("mem=" + v + " root-disk=" + v)
		if err != nil || c.Mem == nil || *c.Mem != 1024 || c.RootDisk == nil || *c.RootDisk != 1024 {
			t.Errorf("mem=%s root-disk=%s: %+v, %v; want 1024 MiB each", v, v, c, err)
		}
	}
}
