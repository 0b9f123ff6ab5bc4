package state_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// TestAPIServerLoads: a published load reads back, in server order; a
// later publish of the same server replaces it (the earlier release then
// does nothing); release removes it; a bad server id or count is refused.
func TestAPIServerLoads(t *testing.T) {
	st := statetest.New(t)
	ctx := t.Context()
	relB, err := st.PublishAPIServerLoad(ctx, state.APIServerLoad{Server: "host-b", Conns: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer relB()
	relA1, err := st.PublishAPIServerLoad(ctx, state.APIServerLoad{Server: "host-a", Conns: 3})
	if err != nil {
		t.Fatal(err)
	}
	a := state.APIServerLoad{Server: "host-a", Conns: 5, Draining: true}
	relA2, err := st.PublishAPIServerLoad(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	relA1()
	got, err := st.APIServerLoads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []state.APIServerLoad{a, {Server: "host-b", Conns: 7}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("loads %+v, want %+v", got, want)
	}
	relA2()
	if got, _ := st.APIServerLoads(ctx); len(got) != 1 || got[0].Server != "host-b" {
		t.Fatalf("loads after release: %+v", got)
	}
	for _, bad := range []state.APIServerLoad{
		{Server: ""},
		{Server: "a/b"},
		{Server: strings.Repeat("x", 129)},
		{Server: "host-c", Conns: -1},
	} {
		if _, err := st.PublishAPIServerLoad(ctx, bad); !errors.Is(err, errors.NotValid) {
			t.Errorf("PublishAPIServerLoad(%+v) = %v, want not valid", bad, err)
		}
	}
}
