package provisiondtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// AddModel adds a model called name of type typ ("iaas" or "caas") with
// config through ModelAdmin and returns its UUID (its config starts with
// agent-version, the daemon's version, as in Juju).
func (s *Server) AddModel(t testing.TB, name, typ string, config map[string]any) string {
	t.Helper()
	ma, err := s.modelAdmin()
	if err != nil {
		t.Fatalf("provisiondtest: %v", err)
	}
	ctx, cancel := callCtx()
	defer cancel()
	m, err := ma.AddModel(ctx, params.AddModelArgs{Name: name, Type: typ, Config: config})
	if err != nil {
		t.Fatalf("provisiondtest: add model %q: %v", name, err)
	}
	return m.UUID
}

// CAASApp is an application CAASModel deploys.
type CAASApp struct {
	Name  string
	Scale int // the desired number of units (0 is 0)
	// CharmMetadata is the charm's metadata.yaml; empty is a minimal
	// Kubernetes charm named after the application.
	CharmMetadata string
	Config        map[string]any
	Trust         bool
	// Storage are storage constraints "NAME=POOL,SIZE,COUNT" of the
	// charm's storage (see ModelAdmin.Deploy).
	Storage []string
	// PodSpec is the application's pod spec (YAML), set after the deploy
	// as `provisionctl set-pod-spec` does; empty is a spec with one
	// container named after the application.
	PodSpec string
}

// CAASModel adds a CAAS model called name and deploys apps in it, each at its scale and with a
// pod spec, through ModelAdmin (as `provisionctl add-model --type caas`,
// `deploy` and `set-pod-spec` do), so that the unit provisioner's
// ProvisioningInfo answers; it returns the model's UUID. The units
// appear when the unit provisioner reports the pods
// (CAASUnitProvisioner.UpdateApplicationsUnits, as the controller agent).
func (s *Server) CAASModel(t testing.TB, name string, apps ...CAASApp) string {
	t.Helper()
	uuid := s.AddModel(t, name, "caas", nil)
	ma, err := s.modelAdmin()
	if err != nil {
		t.Fatalf("provisiondtest: %v", err)
	}
	for _, app := range apps {
		if err := deploy(ma, name, app); err != nil {
			t.Fatalf("provisiondtest: deploy %q in %q: %v", app.Name, name, err)
		}
	}
	return uuid
}

func deploy(ma *client.ModelAdmin, model string, app CAASApp) error {
	meta := app.CharmMetadata
	if meta == "" {
		meta = fmt.Sprintf("name: %s\nsummary: %s\ndescription: provisiondtest's charm.\ncontainers:\n  %s:\n    resource: %s-image\nresources:\n  %s-image:\n    type: oci-image\n",
			app.Name, app.Name, app.Name, app.Name, app.Name)
	}
	ctx, cancel := callCtx()
	defer cancel()
	scale := app.Scale
	if _, err := ma.Deploy(ctx, params.DeployArgs{Model: model, Application: app.Name, CharmMetadata: meta,
		Scale: &scale, Config: app.Config, Trust: app.Trust, Storage: app.Storage}); err != nil {
		return err
	}
	spec := app.PodSpec
	if spec == "" {
		spec = fmt.Sprintf("containers:\n- name: %s\n  image: %s-image\n", app.Name, app.Name)
	}
	_, err := ma.SetPodSpec(ctx, params.SetPodSpecArgs{Model: model, Application: app.Name, Spec: spec})
	return err
}

// modelAdmin is ModelAdmin on the Server's own admin connection to /api.
func (s *Server) modelAdmin() (*client.ModelAdmin, error) {
	c, err := s.ownConn("", "admin", func(c *client.Conn, ctx context.Context) error {
		_, err := c.LoginAdmin(ctx, s.Credentials())
		return err
	})
	if err != nil {
		return nil, err
	}
	return client.NewModelAdmin(c), nil
}
