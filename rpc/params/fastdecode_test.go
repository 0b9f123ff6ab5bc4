package params_test

import (
	"math/rand/v2"
	"testing"
)

// What the tests of the DecodeFast methods share: the table of inputs and
// whether the fast path takes them, and the generator of near-misses.

// fastCase is an input and whether DecodeFast takes it.
type fastCase struct {
	in   string
	fast bool
}

// checkFastCases runs DecodeFast of a new T on each case: it must take
// exactly those marked fast, decode them as encoding/json does (same),
// and leave the value empty (filled reports otherwise) when it refuses.
func checkFastCases[T any, P interface {
	*T
	DecodeFast([]byte) bool
}](t *testing.T, cases []fastCase, same func(*testing.T, []byte, T), filled func(T) bool) {
	t.Helper()
	for _, tt := range cases {
		var v T
		ok := P(&v).DecodeFast([]byte(tt.in))
		if ok != tt.fast {
			t.Errorf("DecodeFast(%s) = %v, want %v", tt.in, ok, tt.fast)
		}
		if ok {
			same(t, []byte(tt.in), v)
		} else if filled(v) {
			t.Errorf("DecodeFast(%s) refused but filled %v", tt.in, v)
		}
	}
}

// nearMiss makes inputs close to a wire form: mostly its usual tokens,
// sometimes others, with JSON (and not JSON) whitespace between.
type nearMiss struct{ rng *rand.Rand }

func newNearMiss(seed uint64) nearMiss { return nearMiss{rand.New(rand.NewPCG(seed, seed+1))} }

func (g nearMiss) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

// good is mostly one of the first n of xs, sometimes any of them.
func (g nearMiss) good(n int, xs ...string) string {
	if g.rng.IntN(10) < 8 {
		return xs[g.rng.IntN(n)]
	}
	return g.pick(xs...)
}

func (g nearMiss) space() string { return g.pick("", "", "", " ", "\n ", "\t", "\r\n", "\u00a0") }

// agree decodes 100,000 inputs of gen (a tenth of them cut short) with
// decode, which reports whether the fast path took the input (and checks
// it then); it fails if the fast path took too few to be tested.
func (g nearMiss) agree(t *testing.T, gen func() string, decode func([]byte) bool) {
	t.Helper()
	accepted := 0
	for range 100000 {
		data := []byte(gen())
		if g.rng.IntN(10) == 0 {
			data = data[:g.rng.IntN(len(data)+1)]
		}
		if decode(data) {
			accepted++
		}
	}
	t.Logf("%d of 100,000 took the fast path", accepted)
	if accepted < 1000 {
		t.Errorf("only %d took the fast path: the generator no longer exercises it", accepted)
	}
}
