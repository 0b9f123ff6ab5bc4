package environ

import (
	"fmt"
	"math/big"
	"net/netip"
)

// AddressRange is the allocatable range of a subnet: Low to High
// inclusive, both inside the subnet's CIDR.
type AddressRange struct {
	Low, High netip.Addr
}

// ParseRange checks a subnet's CIDR and allocatable range. Empty low and
// high give the zero range (no allocation).
func ParseRange(cidr, low, high string) (netip.Prefix, AddressRange, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Prefix{}, AddressRange{}, fmt.Errorf("invalid CIDR %q: want ADDRESS/BITS, such as 10.0.0.0/24", cidr)
	}
	if p.Masked() != p {
		return netip.Prefix{}, AddressRange{}, fmt.Errorf("invalid CIDR %q: not canonical, its network address is %s (want %s)", cidr, p.Masked().Addr(), p.Masked())
	}
	if low == "" && high == "" {
		return p, AddressRange{}, nil
	}
	l, errL := netip.ParseAddr(low)
	h, errH := netip.ParseAddr(high)
	if errL != nil || errH != nil {
		return p, AddressRange{}, fmt.Errorf("invalid allocatable range %q-%q: want two addresses LOW-HIGH, such as 10.0.0.10-10.0.0.200", low, high)
	}
	if h.Less(l) {
		return p, AddressRange{}, fmt.Errorf("allocatable range %s-%s is reversed: LOW must not be above HIGH (%s-%s)", l, h, h, l)
	}
	if !p.Contains(l) || !p.Contains(h) {
		return p, AddressRange{}, fmt.Errorf("allocatable range %s-%s is not inside %s", l, h, p)
	}
	return p, AddressRange{Low: l, High: h}, nil
}

// Valid reports whether r has addresses.
func (r AddressRange) Valid() bool { return r.Low.IsValid() && r.High.IsValid() }

// Size returns the number of addresses in r (0 for an invalid range).
func (r AddressRange) Size() *big.Int {
	if !r.Valid() {
		return new(big.Int)
	}
	n := new(big.Int).Sub(addrInt(r.High), addrInt(r.Low))
	return n.Add(n, big.NewInt(1))
}

// Nth returns the address offset n (modulo the size) from Low.
func (r AddressRange) Nth(n uint64) netip.Addr {
	size := r.Size()
	off := new(big.Int).Mod(new(big.Int).SetUint64(n), size)
	return intAddr(new(big.Int).Add(addrInt(r.Low), off), r.Low.Is4())
}

// MaxScan bounds how many addresses Each visits: a range larger than that
// (IPv6) is treated as exhausted after MaxScan used addresses in a row
// from a random start, so one allocation never holds the database writer
// for long.
const MaxScan = 1 << 16

// Each calls fn with the addresses of r starting at offset start and
// wrapping around, until fn returns false or every address (at most
// MaxScan) was visited.
func (r AddressRange) Each(start uint64, fn func(netip.Addr) bool) {
	if !r.Valid() {
		return
	}
	size := r.Size()
	if !size.IsUint64() || size.Uint64() > MaxScan {
		size = big.NewInt(MaxScan)
	}
	n := size.Uint64()
	a := r.Nth(start)
	for i := uint64(0); i < n; i++ {
		if !fn(a) {
			return
		}
		if a == r.High {
			a = r.Low
		} else {
			a = a.Next()
		}
	}
}

func addrInt(a netip.Addr) *big.Int {
	b := a.AsSlice()
	return new(big.Int).SetBytes(b)
}

func intAddr(n *big.Int, v4 bool) netip.Addr {
	size := 16
	if v4 {
		size = 4
	}
	b := n.FillBytes(make([]byte, size))
	a, _ := netip.AddrFromSlice(b)
	return a
}

// DefaultGateway is the gateway of a subnet whose operator named none:
// the first address after the network address.
func DefaultGateway(p netip.Prefix) netip.Addr { return p.Addr().Next() }
