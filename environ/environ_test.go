package environ

import (
	"net/netip"
	"regexp"
	"testing"
)

func TestParseVersions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"3.3.0", "3.3.0", true},
		{"2.9.42.1", "2.9.42.1", true},
		{"2.0-beta1", "2.0-beta1", true},
		{"3", "", false},
		{"x.y.z", "", false},
	} {
		n, err := ParseNumber(tc.in)
		if (err == nil) != tc.ok || (tc.ok && n.String() != tc.want) {
			t.Errorf("ParseNumber(%q) = %v, %v", tc.in, n, err)
		}
	}
	b, err := ParseBinary("1.25.0-trusty-amd64")
	if err != nil || b.Release != "trusty" || b.Arch != "amd64" || b.Major != 1 || b.String() != "1.25.0-trusty-amd64" {
		t.Errorf("ParseBinary = %+v, %v", b, err)
	}
	beta, _ := ParseNumber("3.3-beta1")
	rel, _ := ParseNumber("3.3.0")
	if beta.Compare(rel) >= 0 {
		t.Error("beta sorts after release")
	}
}

func TestFindTools(t *testing.T) {
	var catalog []Tools
	for _, v := range []string{"3.3.1-ubuntu-amd64", "3.3.0-ubuntu-amd64", "3.3.0-ubuntu-arm64", "2.9.0-ubuntu-amd64", "1.25.0-trusty-amd64"} {
		b, err := ParseBinary(v)
		if err != nil {
			t.Fatal(err)
		}
		catalog = append(catalog, Tools{Version: b})
	}
	names := func(ts []Tools) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Version.String())
		}
		return out
	}
	n330, _ := ParseNumber("3.3.0")
	for _, tc := range []struct {
		f    ToolsFilter
		want int
	}{
		{ToolsFilter{Minor: -1}, 5},
		{ToolsFilter{Number: n330}, 2},
		{ToolsFilter{Number: n330, Arch: "arm64"}, 1},
		{ToolsFilter{Major: 3, Minor: -1}, 3},
		{ToolsFilter{Major: 2, Minor: 9}, 1},
		{ToolsFilter{Major: 3, Minor: 2}, 0},
		{ToolsFilter{Release: "ubuntu", Minor: -1}, 4},
		{ToolsFilter{Release: "trusty", Minor: -1}, 5}, // its own and those of its OS
		{ToolsFilter{Release: "jammy", Major: 1, Minor: -1}, 0},
		{ToolsFilter{Release: "centos7", Minor: -1}, 0},
	} {
		if got := FindTools(catalog, tc.f); len(got) != tc.want {
			t.Errorf("FindTools(%+v) = %v; want %d", tc.f, names(got), tc.want)
		}
	}
	if got := names(FindTools(catalog, ToolsFilter{Minor: -1})); got[0] != "1.25.0-trusty-amd64" || got[4] != "3.3.1-ubuntu-amd64" {
		t.Errorf("not sorted: %v", got)
	}
}

func TestRanges(t *testing.T) {
	_, r, err := ParseRange("10.0.0.0/24", "10.0.0.250", "10.0.0.255")
	if err != nil {
		t.Fatal(err)
	}
	if r.Size().Int64() != 6 || r.Nth(7).String() != "10.0.0.251" {
		t.Errorf("size %v nth %v", r.Size(), r.Nth(7))
	}
	var seen []string
	r.Each(4, func(a netip.Addr) bool { seen = append(seen, a.String()); return true })
	if len(seen) != 6 || seen[0] != "10.0.0.254" || seen[2] != "10.0.0.250" {
		t.Errorf("Each from 4 = %v", seen)
	}
	_, r6, err := ParseRange("fd00::/64", "fd00::10", "fd00::12")
	if err != nil || r6.Size().Int64() != 3 || r6.Nth(1).String() != "fd00::11" {
		t.Errorf("ipv6 range %v %v", r6, err)
	}
	for _, bad := range [][3]string{{"10.0.0.0/33", "", ""}, {"10.0.0.1/24", "", ""}, {"10.0.0.0/24", "10.0.1.1", "10.0.1.2"},
		{"10.0.0.0/24", "10.0.0.9", "10.0.0.8"}, {"10.0.0.0/24", "x", "10.0.0.8"}} {
		if _, _, err := ParseRange(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("ParseRange(%v) succeeded", bad)
		}
	}
	if _, r, _ := ParseRange("10.0.0.0/24", "", ""); r.Valid() {
		t.Error("empty range is valid")
	}
}

func TestNetworking(t *testing.T) {
	if !regexp.MustCompile(`^00:16:3e:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$`).MatchString(GenerateMACAddress()) {
		t.Error("bad MAC")
	}
	p := New()
	subnets := []Subnet{
		{CIDR: "10.0.0.0/24", Zones: []string{"a"}},
		{CIDR: "10.1.0.0/24", Zones: []string{"b"}, AllocatableIPLow: "10.1.0.10", AllocatableIPHigh: "10.1.0.20", Gateway: "10.1.0.254"},
		{CIDR: "10.2.0.0/24"},
	}
	if got := HostSubnets("b", subnets); len(got) != 2 || got[0].CIDR != "10.1.0.0/24" {
		t.Errorf("HostSubnets(b) = %v", got)
	}
	ifaces := p.NetworkInterfaces("i-1", subnets)
	if len(ifaces) != 3 || ifaces[1].InterfaceName != "eth1" || ifaces[1].Address != "10.1.0.254" || ifaces[0].Address != "10.0.0.1" ||
		ifaces[0].MACAddress != p.NetworkInterfaces("i-1", subnets)[0].MACAddress {
		t.Errorf("interfaces = %+v", ifaces)
	}
	s, iface, err := p.AllocationSubnet(ifaces, subnets)
	if err != nil || s.CIDR != "10.1.0.0/24" || iface.InterfaceName != "eth1" {
		t.Errorf("AllocationSubnet = %v %v %v", s, iface, err)
	}
	if _, _, err := p.AllocationSubnet(nil, subnets); err != ErrNoInterfaces {
		t.Errorf("no interfaces: %v", err)
	}
	if _, _, err := p.AllocationSubnet(ifaces[:1], subnets[:1]); err != ErrAllocationNotSupported {
		t.Errorf("no range: %v", err)
	}
	if z := AvailabilityZones(subnets); len(z) != 2 || z[0] != "a" {
		t.Errorf("zones = %v", z)
	}
}

func TestSeriesBases(t *testing.T) {
	for _, c := range []struct{ series, os, track string }{
		{"trusty", "ubuntu", "14.04"}, {"xenial", "ubuntu", "16.04"}, {"bionic", "ubuntu", "18.04"},
		{"focal", "ubuntu", "20.04"}, {"jammy", "ubuntu", "22.04"}, {"noble", "ubuntu", "24.04"},
		{"oracular", "ubuntu", "24.10"}, {"plucky", "ubuntu", "25.04"},
		{"centos7", "centos", "7"}, {"centos9", "centos", "9"}, {"kubernetes", "kubernetes", "kubernetes"},
	} {
		if os, track, ok := SeriesBase(c.series); !ok || os != c.os || track != c.track {
			t.Errorf("SeriesBase(%q) = %q, %q, %v", c.series, os, track, ok)
		}
		for _, ch := range []string{c.track, c.track + "/stable", c.track + "/edge"} {
			if s, ok := BaseSeries(c.os, ch); !ok || s != c.series {
				t.Errorf("BaseSeries(%q, %q) = %q, %v; want %q", c.os, ch, s, ok, c.series)
			}
		}
	}
	if _, _, ok := SeriesBase("warty"); ok {
		t.Error("SeriesBase knows warty")
	}
	if _, ok := BaseSeries("ubuntu", "99.04"); ok {
		t.Error("BaseSeries knows ubuntu@99.04")
	}
	b, _ := ParseBinary("3.3.0-ubuntu-amd64")
	if got := b.ForSeries("jammy").String(); got != "3.3.0-jammy-amd64" {
		t.Errorf("ForSeries(jammy) = %s", got)
	}
	if got := b.ForSeries("centos7").String(); got != "3.3.0-ubuntu-amd64" {
		t.Errorf("ForSeries(centos7) = %s", got)
	}
}
