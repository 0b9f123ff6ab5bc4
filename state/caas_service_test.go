package state_test

import (
	"errors"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
)

// TestUpdateApplicationsServices: every item in one commit; an item's
// service part and scale part each commit or not on their own, the later
// error reported (as Juju's UpdateApplicationsService does).
func TestUpdateApplicationsServices(t *testing.T) {
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	ch := state.Charm{URL: "local:web-1", Meta: meta}
	for _, name := range []string{"a", "b"} {
		if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: name, Charm: ch, Scale: 1}); err != nil {
			t.Fatal(err)
		}
	}
	three, one := 3, 1
	// b's generation moves to 5, so that a later scale with generation 2
	// is refused.
	if errs := st.UpdateApplicationsServices(t.Context(), model, []state.ServiceUpdate{{Application: "b", Scale: &one, Generation: 5}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	rev := st.Revision()
	errs := st.UpdateApplicationsServices(t.Context(), model, []state.ServiceUpdate{
		{Application: "a", ProviderID: "svc-a", Addresses: []state.Address{{Value: "10.0.0.1", Type: "ipv4", Scope: "local-cloud"}}, Scale: &three, Generation: 1},
		{Application: "gone", ProviderID: "svc-x"},
		{Application: "b", ProviderID: "svc-b", Scale: &three, Generation: 2},
	})
	if errs[0] != nil {
		t.Errorf("a: %v", errs[0])
	}
	if !errors.Is(errs[1], jujuerrors.NotFound) {
		t.Errorf("gone: %v, want not found", errs[1])
	}
	if !errors.Is(errs[2], jujuerrors.Forbidden) {
		t.Errorf("b: %v, want forbidden (generation reverted)", errs[2])
	}
	if got := st.Revision(); got == rev {
		t.Fatal("nothing committed")
	}
	a, _ := st.Application(t.Context(), model, "a")
	csA, _ := st.CloudService(t.Context(), model, "a")
	if a.Scale != 3 || csA.ProviderID != "svc-a" || len(csA.Addresses) != 1 || csA.Generation != 1 {
		t.Errorf("a: scale %d, service %+v", a.Scale, csA)
	}
	// b's service part committed though its scale part was refused.
	b, _ := st.Application(t.Context(), model, "b")
	csB, _ := st.CloudService(t.Context(), model, "b")
	if b.Scale != 1 || csB.ProviderID != "svc-b" || csB.Generation != 5 {
		t.Errorf("b: scale %d, service %+v", b.Scale, csB)
	}
}
