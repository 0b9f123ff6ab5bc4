package modeladmin_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/params"
)

// Status reads a model in one view of the state. An application removed
// while it runs is either all there or gone, never an error: Status called
// while applications are deployed and removed never fails (it failed with `application "x" not found`, which the dashboard
// shows as a model that could not be read, and which made the reference
// agent's TestKubernetesApplication flaky).
func TestStatusWhileApplicationsComeAndGo(t *testing.T) {
	e := testkit.NewCAAS(t, nil)
	writer := testkit.LoginAdmin(t, e.D, "")
	reader := testkit.LoginAdmin(t, e.D, "")
	const apps = 25

	done := make(chan struct{})
	var wg sync.WaitGroup
	var calls int
	var statusErr error
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			var st params.ModelStatus
			if err := testkit.ModelAdmin(t, reader, "Status", params.ModelArgs{Model: "k8s"}, &st); err != nil {
				statusErr = err
				return
			}
			calls++
		}
	})
	for i := range apps {
		name := fmt.Sprintf("app%d", i)
		meta := fmt.Sprintf("name: %s\nsummary: s\n", name)
		var app params.ApplicationStatus
		if err := testkit.ModelAdmin(t, writer, "Deploy", params.DeployArgs{Model: "k8s", Application: name, CharmMetadata: meta}, &app); err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("Deploy %s: %v", name, err)
		}
		// remove-application makes it dead; its cluster resources
		// cleared by the unit provisioner, it goes.
		var clr params.ErrorResults
		if err := testkit.ModelAdmin(t, writer, "RemoveApplication", params.ApplicationArgs{Model: "k8s", Application: name}, &app); err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("RemoveApplication %s: %v", name, err)
		}
		if err := e.Call("ClearApplicationsResources", testkit.Ents("application-"+name), &clr); err != nil || len(clr.Results) != 1 || clr.Results[0].Error != nil {
			close(done)
			wg.Wait()
			t.Fatalf("ClearApplicationsResources %s: %v %+v", name, err, clr.Results)
		}
	}
	close(done)
	wg.Wait()
	if statusErr != nil {
		t.Fatalf("Status after %d calls, while applications were deployed and removed: %v", calls, statusErr)
	}
	var st params.ModelStatus
	if err := testkit.ModelAdmin(t, reader, "Status", params.ModelArgs{Model: "k8s"}, &st); err != nil || len(st.Applications) != 0 {
		t.Fatalf("Status at the end: %d applications, %v", len(st.Applications), err)
	}
	t.Logf("%d Status calls raced %d deploys and removals", calls, apps)
}
