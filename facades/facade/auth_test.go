package facade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/state"
)

// FuzzTags: tag parsing as the facades use it never panics; a tag that
// parses prints back in a form that parses to the same tag; MachineTag accepts exactly the machine
// tags (anything else is permission denied, never a parse error); and
// CanAccessMachine follows specs/provisioner.md §1.2 for any tag: the
// controller reaches top-level machines, an agent itself and its direct
// containers, nobody a grandchild or a non-machine.
func FuzzTags(f *testing.F) {
	for _, s := range []string{
		"machine-0", "machine-0-lxd-0", "machine-0-lxd-0-lxd-1", "machine-1-kvm-12", "machine-", "machine-01",
		"machine-0-lxd", "machine-0-foo-0", "unit-wordpress-0", "unit-a-b-10", "application-wordpress",
		"application-", "user-admin", "user-admin@local", "user-bob@external", "model-11111111-2222-4333-8444-555555555555",
		"controller-11111111-2222-4333-8444-555555555555", "not a tag!", "", "-", "machine--1", "machine-0/lxd/0",
		"machine-\u00e9", "machine-0\x00", "machine-10", "machine-007", "machine-1x", "machine-1-", "machine-١", "network-net1", "volume-0", "filesystem-0-1", "space-db", "subnet-1",
	} {
		f.Add(s)
	}
	agent := &Context{Model: &state.Model{UUID: "m"}, Auth: Auth{Tag: names.NewMachineTag("0"), Machine: &AgentMachine{ID: "0", Model: "m"}}}
	ctrl := &Context{Model: &state.Model{UUID: "m"}, Auth: Auth{Tag: names.NewMachineTag("0"), Machine: &AgentMachine{ID: "0", Model: "c"}, Controller: true}}
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := ParseTag(s)
		// juju/names canonicalises a few spellings ("user-admin@local",
		// "machine-0/lxd/0"); the canonical form parses to the same tag.
		if err == nil {
			if again, err2 := ParseTag(tag.String()); err2 != nil || again != tag {
				t.Errorf("ParseTag(%q) = %v, whose String() parses to %v, %v", s, tag, again, err2)
			}
		}
		mt, merr := MachineTag(s)
		_, isMachine := tag.(names.MachineTag)
		switch {
		case merr != nil && merr != ErrPerm:
			t.Errorf("MachineTag(%q) = %v; want ErrPerm", s, merr)
		case merr == nil && (err != nil || !isMachine || mt != tag):
			t.Errorf("MachineTag(%q) accepted a non-machine tag", s)
		case merr != nil && err == nil && isMachine:
			t.Errorf("MachineTag(%q) refused a machine tag", s)
		}
		if err != nil {
			return
		}
		depth := 0
		if isMachine {
			depth = strings.Count(mt.Id(), "/") / 2
			if p := state.ParentID(mt.Id()); (p == "") != (mt.Parent() == nil) {
				t.Errorf("%q: state.ParentID %q, names parent %v", s, p, mt.Parent())
			}
		}
		if got, want := ctrl.CanAccessMachine(tag), isMachine && depth == 0; got != want {
			t.Errorf("controller CanAccessMachine(%q) = %v; want %v", s, got, want)
		}
		own := s == "machine-0" || (isMachine && depth == 1 && state.ParentID(mt.Id()) == "0")
		if got := agent.CanAccessMachine(tag); got != own {
			t.Errorf("machine-0 agent CanAccessMachine(%q) = %v; want %v", s, got, own)
		}
	})
}

// A controller agent id that overflows an int makes juju/names panic; the
// wrappers give the parse error instead (found by FuzzTags).
func TestParseTagNoPanic(t *testing.T) {
	const s = "controller-10000000000000000000"
	if _, err := ParseTag(s); err == nil || err.Error() != `"controller-10000000000000000000" is not a valid tag` {
		t.Errorf("ParseTag = %v", err)
	}
	if _, err := ParseMachineTag(s); err == nil || err.Error() != `"controller-10000000000000000000" is not a valid machine tag` {
		t.Errorf("ParseMachineTag = %v", err)
	}
	if _, err := MachineTag(s); err != ErrPerm {
		t.Errorf("MachineTag = %v", err)
	}
	if tag, err := ParseTag("controller-7"); err != nil || tag.Kind() != names.ControllerAgentTagKind {
		t.Errorf("ParseTag(controller-7) = %v, %v", tag, err)
	}
}

// Facades parse wire tags only through the panic-free wrappers of tags.go.
func TestNoDirectTagParsing(t *testing.T) {
	files, err := filepath.Glob("../*/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("glob: %v, %d files", err, len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "facade/tags.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "names.Parse") {
			t.Errorf("%s calls names.Parse*: use facade.Parse* (juju/names can panic on wire input)", f)
		}
	}
}
