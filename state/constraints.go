package state

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/size"
)

// Architectures a machine constraint or agent binary may name (Juju's
// arch.AllSupportedArches, plus the 2015 i386 and armhf).
var Arches = []string{"amd64", "arm64", "ppc64el", "s390x", "riscv64", "i386", "armhf"}

// ValidateArch checks an architecture name.
func ValidateArch(a string) error {
	if !slices.Contains(Arches, a) {
		return errors.NotValidf("architecture %q", a)
	}
	return nil
}

// ParseConstraints parses machine constraints in Juju's syntax:
// space-separated KEY=VALUE pairs, as "juju add-machine --constraints"
// takes them. The keys:
//
//	arch                 amd64, arm64, ppc64el, s390x, riscv64 (i386, armhf)
//	container            lxd, kvm, lxc or none
//	cores (cpu-cores)    a non-negative integer
//	cpu-power            a non-negative integer
//	mem, root-disk       a non-negative number of MiB, with an optional
//	                     M, G, T or P suffix (powers of 1024); fractions
//	                     round up: mem=1.5G is 1536
//	root-disk-source, instance-role, instance-type, virt-type, image-id
//	                     any string
//	tags, zones          comma-separated lists
//	spaces               comma-separated space names, "^" before a name
//	                     excludes that space
//	allocate-public-ip   true or false
//
// An empty value sets the key to its zero value ("arch=" means any
// architecture), as in Juju. A key given twice, an unknown key and a field
// without "=" are errors. Errors satisfy errors.Is(err, errors.NotValid)
// and read as Juju's: `bad "mem" constraint: must be a non-negative float
// with optional M/G/T/P suffix`.
func ParseConstraints(s string) (Constraints, error) {
	var c Constraints
	seen := map[string]bool{}
	for _, field := range strings.Fields(s) {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return Constraints{}, errors.NewNotValid(nil, fmt.Sprintf("malformed constraint %q", field))
		}
		if key == "cpu-cores" {
			key = "cores"
		}
		if seen[key] {
			return Constraints{}, badConstraint(key, "already set")
		}
		seen[key] = true
		if err := c.set(key, value); err != nil {
			return Constraints{}, err
		}
	}
	return c, nil
}

func badConstraint(key, msg string) error {
	return errors.NewNotValid(nil, fmt.Sprintf("bad %q constraint: %s", key, msg))
}

func (c *Constraints) set(key, value string) error {
	str := func() *string { v := value; return &v }
	switch key {
	case "arch":
		if value != "" && ValidateArch(value) != nil {
			return badConstraint(key, fmt.Sprintf("%q not recognized", value))
		}
		c.Arch = str()
	case "container":
		if value != "" && value != "none" && ValidateContainerType(value) != nil {
			return badConstraint(key, fmt.Sprintf("invalid container type %q", value))
		}
		c.Container = str()
	case "cores", "cpu-power":
		var n uint64
		if value != "" {
			var err error
			if n, err = strconv.ParseUint(value, 10, 64); err != nil {
				return badConstraint(key, "must be a non-negative integer")
			}
		}
		if key == "cores" {
			c.Cores = &n
		} else {
			c.CpuPower = &n
		}
	case "mem", "root-disk":
		n, err := parseConstraintSize(value)
		if err != nil {
			return badConstraint(key, err.Error())
		}
		if key == "mem" {
			c.Mem = &n
		} else {
			c.RootDisk = &n
		}
	case "root-disk-source":
		c.RootDiskSource = str()
	case "instance-role":
		c.InstanceRole = str()
	case "instance-type":
		c.InstanceType = str()
	case "virt-type":
		c.VirtType = str()
	case "image-id":
		c.ImageID = str()
	case "tags":
		l := commaList(value)
		c.Tags = &l
	case "zones":
		l := commaList(value)
		c.Zones = &l
	case "spaces":
		l := commaList(value)
		for _, s := range l {
			name := strings.TrimPrefix(s, "^")
			if !names.IsValidSpace(name) {
				return badConstraint(key, fmt.Sprintf("%q is not a valid space name", name))
			}
		}
		c.Spaces = &l
		for _, s := range c.PositiveSpaces() {
			if slices.Contains(c.NegativeSpaces(), s) {
				return badConstraint(key, fmt.Sprintf("space %q is both included and excluded", s))
			}
		}
	case "allocate-public-ip":
		var b bool
		if value != "" {
			var err error
			if b, err = strconv.ParseBool(value); err != nil {
				return badConstraint(key, "must be 'true' or 'false'")
			}
		}
		c.AllocatePublicIP = &b
	default:
		return errors.NewNotValid(nil, fmt.Sprintf("unknown constraint %q", key))
	}
	return nil
}

// parseConstraintSize reads a size in MiB (package size: the one parser
// of sizes; "" is 0).
func parseConstraintSize(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	return size.ParseMiB(s)
}

func commaList(s string) []string {
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// String formats c in Juju's syntax, so that ParseConstraints reads it back
// (sizes in MiB, "mem=4096M"). The zero value formats as "".
func (c Constraints) String() string {
	var out []string
	add := func(key, value string) { out = append(out, key+"="+value) }
	if c.Arch != nil {
		add("arch", *c.Arch)
	}
	if c.Container != nil {
		add("container", *c.Container)
	}
	if c.Cores != nil {
		add("cores", strconv.FormatUint(*c.Cores, 10))
	}
	if c.CpuPower != nil {
		add("cpu-power", strconv.FormatUint(*c.CpuPower, 10))
	}
	if c.ImageID != nil {
		add("image-id", *c.ImageID)
	}
	if c.InstanceRole != nil {
		add("instance-role", *c.InstanceRole)
	}
	if c.InstanceType != nil {
		add("instance-type", *c.InstanceType)
	}
	if c.Mem != nil {
		add("mem", strconv.FormatUint(*c.Mem, 10)+"M")
	}
	if c.RootDisk != nil {
		add("root-disk", strconv.FormatUint(*c.RootDisk, 10)+"M")
	}
	if c.RootDiskSource != nil {
		add("root-disk-source", *c.RootDiskSource)
	}
	if c.Spaces != nil {
		add("spaces", strings.Join(*c.Spaces, ","))
	}
	if c.Tags != nil {
		add("tags", strings.Join(*c.Tags, ","))
	}
	if c.VirtType != nil {
		add("virt-type", *c.VirtType)
	}
	if c.Zones != nil {
		add("zones", strings.Join(*c.Zones, ","))
	}
	if c.AllocatePublicIP != nil {
		add("allocate-public-ip", strconv.FormatBool(*c.AllocatePublicIP))
	}
	return strings.Join(out, " ")
}

// OS names a machine base may have.
var BaseOSes = []string{"ubuntu", "centos"}

// baseTracks are the versions of each OS Juju knows at the commit this
// project follows (core/base/supported.go: Ubuntu 12.04 to 24.04, every
// release; CentOS 7 and 9). A base of another version is refused, as
// Juju's controller refuses a base it has no series for.
var baseTracks = map[string][]string{
	"ubuntu": {
		"12.04", "12.10", "13.04", "13.10", "14.04", "14.10", "15.04", "15.10",
		"16.04", "16.10", "17.04", "17.10", "18.04", "18.10", "19.04", "19.10",
		"20.04", "20.10", "21.04", "21.10", "22.04", "22.10", "23.04", "23.10",
		"24.04",
	},
	"centos": {"7", "9"},
}

var (
	channelTrack = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
	channelRisks = []string{"stable", "candidate", "beta", "edge"}
)

// ParseBase parses a base in Juju's "OS@CHANNEL" form: "ubuntu@22.04",
// "ubuntu@24.04/edge", "centos@9". The channel is a version track with an
// optional "/RISK" (stable, candidate, beta, edge); as Juju does, a channel
// without a risk is stored with "/stable". Errors satisfy
// errors.Is(err, errors.NotValid).
func ParseBase(s string) (Base, error) {
	bad := func(why string) (Base, error) {
		return Base{}, errors.NewNotValid(nil, fmt.Sprintf("base %q not valid: %s", s, why))
	}
	os, channel, ok := strings.Cut(s, "@")
	if !ok || os == "" || channel == "" {
		return bad(`want OS@CHANNEL, for example "ubuntu@22.04"`)
	}
	if !slices.Contains(BaseOSes, os) {
		return bad(fmt.Sprintf("OS %q is not one of %s", os, strings.Join(BaseOSes, ", ")))
	}
	track, risk, hasRisk := strings.Cut(channel, "/")
	if !channelTrack.MatchString(track) {
		return bad(fmt.Sprintf("channel track %q is not a version such as 22.04", track))
	}
	if known := baseTracks[os]; !slices.Contains(known, track) {
		versions := strings.Join(known, ", ")
		if len(known) > 4 {
			versions = "every release from " + known[0] + " to " + known[len(known)-1]
		}
		return bad(fmt.Sprintf("%s %s is not a version Juju knows (%s: %s)", os, track, os, versions))
	}
	if !hasRisk {
		risk = "stable"
	}
	if !slices.Contains(channelRisks, risk) {
		return bad(fmt.Sprintf("channel risk %q is not one of %s", risk, strings.Join(channelRisks, ", ")))
	}
	return Base{Name: os, Channel: track + "/" + risk}, nil
}

// String formats b as "OS@TRACK", with "/RISK" unless it is stable ("" for
// the zero value).
func (b Base) String() string {
	if b.Name == "" && b.Channel == "" {
		return ""
	}
	return b.Name + "@" + strings.TrimSuffix(b.Channel, "/stable")
}

type modelConstraintsDoc struct {
	Constraints Constraints `json:"constraints"`
}

// ModelConstraints returns a model's constraints (zero if none).
func (st *State) ModelConstraints(ctx context.Context, model string) (Constraints, error) {
	var d modelConstraintsDoc
	err := st.view(ctx, func(r reader) error {
		if _, err := getModelHead(r, model); err != nil {
			return err
		}
		_, err := get(r, KindModelConstraints, model, model, &d)
		return err
	})
	return d.Constraints, err
}

// SetModelConstraints replaces a model's constraints.
func (st *State) SetModelConstraints(ctx context.Context, model string, cons Constraints) error {
	return st.update(ctx, func(tx *txn) error {
		if _, err := getModelHead(tx, model); err != nil {
			return err
		}
		return tx.put(KindModelConstraints, model, model, &modelConstraintsDoc{Constraints: cons}, FieldConstraints)
	})
}

// ResolveConstraints merges the model's constraints under cons: each
// attribute cons leaves unset comes from the model.
func (st *State) ResolveConstraints(ctx context.Context, model string, cons Constraints) (Constraints, error) {
	mc, err := st.ModelConstraints(ctx, model)
	if err != nil {
		return Constraints{}, err
	}
	return mergeConstraints(mc, cons), nil
}

// mergeConstraints returns over with each nil pointer field taken from
// under (JSON round trip of two pointer-only structs).
func mergeConstraints(under, over Constraints) Constraints {
	var m map[string]json.RawMessage
	b, _ := json.Marshal(under)
	_ = json.Unmarshal(b, &m)
	var o map[string]json.RawMessage
	b, _ = json.Marshal(over)
	_ = json.Unmarshal(b, &o)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	maps.Copy(m, o)
	var out Constraints
	b, _ = json.Marshal(m)
	_ = json.Unmarshal(b, &out)
	return out
}

// Constraints are a machine's constraints (Juju's constraints.Value).
type Constraints struct {
	Arch             *string   `json:"arch,omitempty"`
	Container        *string   `json:"container,omitempty"`
	Cores            *uint64   `json:"cores,omitempty"`
	CpuPower         *uint64   `json:"cpu-power,omitempty"`
	Mem              *uint64   `json:"mem,omitempty"`
	RootDisk         *uint64   `json:"root-disk,omitempty"`
	RootDiskSource   *string   `json:"root-disk-source,omitempty"`
	Tags             *[]string `json:"tags,omitempty"`
	InstanceRole     *string   `json:"instance-role,omitempty"`
	InstanceType     *string   `json:"instance-type,omitempty"`
	Spaces           *[]string `json:"spaces,omitempty"`
	VirtType         *string   `json:"virt-type,omitempty"`
	Zones            *[]string `json:"zones,omitempty"`
	AllocatePublicIP *bool     `json:"allocate-public-ip,omitempty"`
	ImageID          *string   `json:"image-id,omitempty"`
	Networks         *[]string `json:"networks,omitempty"` // 2015
}

// PositiveSpaces returns the spaces not prefixed with "^".
func (c Constraints) PositiveSpaces() []string {
	var out []string
	if c.Spaces != nil {
		for _, s := range *c.Spaces {
			if !strings.HasPrefix(s, "^") {
				out = append(out, s)
			}
		}
	}
	return out
}

// NegativeSpaces returns the spaces prefixed with "^", without it.
func (c Constraints) NegativeSpaces() []string {
	var out []string
	if c.Spaces != nil {
		for _, s := range *c.Spaces {
			if n, ok := strings.CutPrefix(s, "^"); ok {
				out = append(out, n)
			}
		}
	}
	return out
}
