package size_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/size"
)

func TestParseMiB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   uint64
		reason string
	}{
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "512", want: 512},
		{in: "512M", want: 512},
		{in: "1M", want: 1},
		{in: "1MB", want: 1},
		{in: "1MiB", want: 1},
		{in: "1G", want: 1024},
		{in: "1GB", want: 1024},
		{in: "1GiB", want: 1024},
		{in: "1024M", want: 1024},
		{in: "1.5G", want: 1536},
		{in: ".5G", want: 512},
		{in: "1.", want: 1},
		{in: "0.1", want: 1},
		{in: "10G", want: 10 << 10},
		{in: "2T", want: 2 << 20},
		{in: "2TiB", want: 2 << 20},
		{in: "1P", want: 1 << 30},
		{in: "1E", want: 1 << 40},
		{in: "1Z", want: 1 << 50},
		{in: "1Y", want: 1 << 60},
		{in: "15Y", want: 15 << 60},
		{in: "16Y", reason: "too large"},
		{in: "99999999999999999999999G", reason: "too large"},
		{in: "", reason: "not a number"},
		{in: "G", reason: "not a number"},
		{in: "GiB", reason: "not a number"},
		{in: ".", reason: "not a number"},
		{in: ".G", reason: "not a number"},
		{in: "-1", reason: "not a number"},
		{in: "nan", reason: "not a number"},
		{in: "inf", reason: "not a number"},
		{in: "1e3", reason: `unknown unit "e3"`},
		{in: "1..2M", reason: "not a number"},
		{in: "10K", reason: `unknown unit "K"`},
		{in: "10Gb", reason: `unknown unit "Gb"`},
		{in: "1g", reason: `unknown unit "g"`},
		{in: " 1G", reason: "not a number"},
		{in: "1 G", reason: `unknown unit " G"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := size.ParseMiB(tc.in)
			if tc.reason == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ParseMiB(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
				}
				return
			}
			var se *size.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("ParseMiB(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.reason)
			}
			// The message names the rule.
			if !strings.Contains(err.Error(), "512M, 1G, 1.5GiB") || !strings.Contains(err.Error(), `"`+tc.in+`"`) {
				t.Errorf("message %q does not name the input and the rule", err)
			}
		})
	}
}

func TestFormatMiB(t *testing.T) {
	t.Parallel()
	for mib, want := range map[uint64]string{0: "0M", 1: "1M", 512: "512M", 1024: "1G", 1536: "1536M",
		10 << 10: "10G", 1 << 20: "1T", 3 << 30: "3P", 1 << 60: "1Y", 1 << 63: "8Y", 1<<64 - 1: "18446744073709551615M"} {
		if got := size.FormatMiB(mib); got != want {
			t.Errorf("FormatMiB(%d) = %q, want %q", mib, got, want)
		}
		if back, err := size.ParseMiB(size.FormatMiB(mib)); err != nil || back != mib {
			t.Errorf("ParseMiB(FormatMiB(%d)) = %d, %v", mib, back, err)
		}
	}
}

// FuzzParseMiB: never panics; what parses formats and parses back to the
// same value.
func FuzzParseMiB(f *testing.F) {
	for _, s := range []string{"1G", "1GiB", "512M", ".5T", "16Y", "1e3", "", "..", "9.99999999999999999999Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := size.ParseMiB(s)
		if err != nil {
			return
		}
		back, err := size.ParseMiB(size.FormatMiB(n))
		if err != nil || back != n {
			t.Fatalf("%q: %d formats as %q, parses back as %d, %v", s, n, size.FormatMiB(n), back, err)
		}
	})
}
