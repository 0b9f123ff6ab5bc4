package storage_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

func TestParseConstraints(t *testing.T) {
	t.Parallel()
	type C = storage.Constraints
	tests := []struct {
		name, in string
		want     C
		err      string
	}{
		{name: "pool and size", in: "pool,1M", want: C{Pool: "pool", Size: 1, Count: 1}},
		{name: "pool only", in: "pool", want: C{Pool: "pool", Count: 1}},
		{name: "pool trailing comma", in: "pool,", want: C{Pool: "pool", Count: 1}},
		{name: "size only", in: "1M", want: C{Size: 1, Count: 1}},
		{name: "count only", in: "3", want: C{Count: 3}},
		{name: "gibibytes", in: "p,1G", want: C{Pool: "p", Size: 1024, Count: 1}},
		{name: "10G", in: "ebs,10G,2", want: C{Pool: "ebs", Size: 10240, Count: 2}},
		{name: "512M", in: "512M", want: C{Size: 512, Count: 1}},
		{name: "fraction of T", in: "p,1,0.5T", want: C{Pool: "p", Size: 512 * 1024, Count: 1}},
		{name: "fraction of P", in: "p,0.125P,3", want: C{Pool: "p", Size: 128 * 1024 * 1024, Count: 3}},
		{name: "any order", in: "3,p,0.125P", want: C{Pool: "p", Size: 128 * 1024 * 1024, Count: 3}},
		{name: "size then count then pool", in: "2G,4,tmpfs", want: C{Pool: "tmpfs", Size: 2048, Count: 4}},
		{name: "GB suffix", in: "1GB", want: C{Size: 1024, Count: 1}},
		{name: "GiB suffix", in: "1GiB", want: C{Size: 1024, Count: 1}},
		{name: "rounded up", in: "1.0001M", want: C{Size: 2, Count: 1}},
		{name: "pool with hyphen and digits", in: "fast-ssd2,7", want: C{Pool: "fast-ssd2", Count: 7}},
		{name: "pool with question mark (Juju's pattern)", in: "p?0l", want: C{Pool: "p?0l", Count: 1}},
		{name: "empty fields skipped", in: ",,p,,1M,", want: C{Pool: "p", Size: 1, Count: 1}},
		{name: "zero size with pool", in: "p,0M", want: C{Pool: "p", Count: 1}},

		{name: "empty", in: "", err: "storage constraints require at least one field to be specified"},
		{name: "comma", in: ",", err: "storage constraints require at least one field to be specified"},
		{name: "zero size alone", in: "0M", err: "storage constraints require at least one field to be specified"},
		{name: "zero count", in: "p,0,100M", err: `cannot parse count: count must be greater than zero, got "0"`},
		{name: "double zero count", in: "p,00,100M", err: `cannot parse count: count must be greater than zero, got "00"`},
		{name: "negative count", in: "p,-1,100M", err: `cannot parse count: count must be greater than zero, got "-1"`},
		{name: "negative size", in: "p,-100M", err: `cannot parse size: size "-100M": not a number; want a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB`},
		{name: "second pool", in: "pool1,pool2", err: `pool name is already set to "pool1", new value "pool2" not valid`},
		{name: "third pool", in: "pool1,pool2,pool3", err: `pool name is already set to "pool1", new value "pool2" not valid`},
		{name: "second count", in: "pool1,10,20", err: "storage instance count is already set to 10, new value 20 not valid"},
		{name: "second size", in: "pool1,10M,20M", err: "storage size is already set to 10, new value 20 not valid"},
		{name: "space inside", in: "p,100M database-b", err: `unrecognized storage constraint "100M database-b" not valid`},
		{name: "dollar", in: "p,$1234", err: `unrecognized storage constraint "$1234" not valid`},
		{name: "size without suffix", in: "1.5", err: `unrecognized storage constraint "1.5" not valid`},
		{name: "unknown suffix", in: "10K", err: `unrecognized storage constraint "10K" not valid`},
		{name: "pool starting with digit", in: "7ool", err: `unrecognized storage constraint "7ool" not valid`},
		{name: "count too large for uint64", in: "99999999999999999999", err: `unrecognized storage constraint "99999999999999999999" not valid`},
		{name: "size too large for uint64", in: "99999999Y", err: `cannot parse size: size "99999999Y": too large (at most 2^64-1 MiB); want a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB`},
		{name: "name=constraints is not constraints", in: "data=p", err: `unrecognized storage constraint "data=p" not valid`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storage.ParseConstraints(tc.in)
			if tc.err != "" {
				checkErr(t, err, tc.err, errors.NotValid)
				return
			}
			checkErr(t, err, "", nil)
			if got != tc.want {
				t.Fatalf("ParseConstraints(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// Sizes are read by package size: 1G, 1GiB, 1GB and 1024M are one size.
func TestConstraintSizesAreOneParser(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"loop,1G", "loop,1GiB", "loop,1GB", "loop,1024M", "loop,1024MiB", "loop,.0009765625T"} {
		c, err := storage.ParseConstraints(in)
		if err != nil || c.Size != 1024 {
			t.Errorf("ParseConstraints(%q) = %+v, %v; want size 1024", in, c, err)
		}
	}
	if _, err := storage.ParseConstraints("loop,1.5.5G"); err == nil {
		t.Error("loop,1.5.5G parsed")
	}
}

func TestIsValidPoolName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"pool": true, "p-ool": true, "p-00l": true, "p?00l": true, "p-?00l": true,
		"p": true, "P": true, "p?0?l": true, "M": true, "ebs-ssd": true,
		"": false, "7ool": false, "/ool": false, "-00l": false, "*00l": false,
		"p_ool": false, "p ool": false, "pööl": false, "p.ool": false,
	} {
		if got := storage.IsValidPoolName(name); got != want {
			t.Errorf("IsValidPoolName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestConstraintsString(t *testing.T) {
	t.Parallel()
	type C = storage.Constraints
	tests := []struct {
		in   C
		want string
	}{
		{C{}, ""},
		{C{Pool: "loop"}, "loop"},
		{C{Pool: "loop", Count: 1}, "loop,1"},
		{C{Pool: "loop", Size: 1024}, "loop,1024M"},
		{C{Pool: "loop", Count: 1, Size: 1024}, "loop,1,1024M"},
		{C{Size: 1024}, "1024M"},
		{C{Count: 1}, "1"},
		{C{Count: 1, Size: 1024}, "1,1024M"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			if got := tc.in.String(); got != tc.want {
				t.Fatalf("%+v.String() = %q, want %q", tc.in, got, tc.want)
			}
			if tc.want == "" {
				return
			}
			back, err := storage.ParseConstraints(tc.want)
			checkErr(t, err, "", nil)
			want := tc.in
			if want.Count == 0 {
				want.Count = 1
			}
			if back != want {
				t.Fatalf("round trip of %q = %+v, want %+v", tc.want, back, want)
			}
		})
	}
}

func TestParseConstraintsMap(t *testing.T) {
	t.Parallel()
	type C = storage.Constraints
	tests := []struct {
		name     string
		args     []string
		mustHave bool
		want     map[string]C
		err      string
	}{
		{name: "none", args: nil, want: map[string]C{}},
		{name: "full", args: []string{"data=p,1M,"}, mustHave: true, want: map[string]C{"data": {Pool: "p", Size: 1, Count: 1}}},
		{name: "NAME=POOL,SIZE,COUNT", args: []string{"pgdata=ebs,10G,2"}, want: map[string]C{"pgdata": {Pool: "ebs", Size: 10240, Count: 2}}},
		{name: "bare name", args: []string{"data"}, want: map[string]C{"data": {Count: 1}}},
		{name: "several", args: []string{"data=3", "cache"}, want: map[string]C{"data": {Count: 3}, "cache": {Count: 1}}},
		{name: "must have", args: []string{"data"}, mustHave: true, err: `expected "name=constraints" where "constraints" must be specified, got "data"`},
		{name: "two equals", args: []string{"data=p,=1M,"}, err: `expected "name=constraints" or "name", got "data=p,=1M,"`},
		{name: "no name", args: []string{"=p"}, err: `expected "name=constraints" or "name", got "=p"`},
		{name: "empty arg", args: []string{""}, err: `expected "name=constraints" or "name", got ""`},
		{name: "twice", args: []string{"data", "data"}, err: `storage "data" specified more than once`},
		{name: "twice before parsing", args: []string{"data=1", "data=-1"}, err: `storage "data" specified more than once`},
		{name: "bad count", args: []string{"data=-1"}, err: `cannot parse constraints for storage "data": cannot parse count: count must be greater than zero, got "-1"`},
		{name: "empty constraints", args: []string{"data="}, err: `cannot parse constraints for storage "data": storage constraints require at least one field to be specified`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storage.ParseConstraintsMap(tc.args, tc.mustHave)
			if tc.err != "" {
				checkErr(t, err, tc.err, errors.NotValid)
				return
			}
			checkErr(t, err, "", nil)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseNamedConstraints(t *testing.T) {
	t.Parallel()
	name, cons, err := storage.ParseNamedConstraints("data=tmpfs,512M", false)
	checkErr(t, err, "", nil)
	if name != "data" || cons != (storage.Constraints{Pool: "tmpfs", Size: 512, Count: 1}) {
		t.Fatalf("got %q %+v", name, cons)
	}
	_, _, err = storage.ParseNamedConstraints("data=tmpfs,512X", false)
	checkErr(t, err, `cannot parse constraints for storage "data": unrecognized storage constraint "512X" not valid`, errors.NotValid)
}

// FuzzParseConstraints checks that parsing never panics, that what parses
// is sane, and that String round-trips it. The seed corpus runs as a test.
func FuzzParseConstraints(f *testing.F) {
	for _, s := range []string{
		"", ",", "pool", "pool,1M", "p,0.125P,3", "3,p,0.125P", "p,-1,100M", "p,-100M",
		"pool1,pool2", "pool1,10,20", "pool1,10M,20M", "p,$1234", "99999999Y", "1.5G",
		"99999999999999999999", "ebs,10G,2", "M", "0M", "p?0l,1GiB", "data=p",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cons, err := storage.ParseConstraints(s)
		if err != nil {
			if !errors.Is(err, errors.NotValid) {
				t.Fatalf("ParseConstraints(%q): error %q is not NotValid", s, err)
			}
			return
		}
		if cons.Count == 0 {
			t.Fatalf("ParseConstraints(%q) gave count 0", s)
		}
		if cons.Pool != "" && !storage.IsValidPoolName(cons.Pool) {
			t.Fatalf("ParseConstraints(%q) gave invalid pool %q", s, cons.Pool)
		}
		if cons.Pool != "" && !strings.Contains(s, cons.Pool) {
			t.Fatalf("ParseConstraints(%q) invented pool %q", s, cons.Pool)
		}
		back, err := storage.ParseConstraints(cons.String())
		if err != nil || back != cons {
			t.Fatalf("round trip of %q via %q = %+v, %v; want %+v", s, cons.String(), back, err, cons)
		}
	})
}
