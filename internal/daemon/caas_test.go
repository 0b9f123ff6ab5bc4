package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

// CAASUnitProvisioner v2 through the real RPC stack on real bbolt.

const gitlabMeta = `
name: gitlab
summary: GitLab
description: A forge.
storage:
  data:
    type: filesystem
    location: /var/opt/gitlab
deployment:
  type: stateful
  service: loadbalancer
devices:
  gpu:
    type: nvidia.com/gpu
`

type caasEnv struct {
	t     *testing.T
	d     *daemon.Daemon
	st    *state.State
	model string
	c     *client.Conn
}

func newCAAS(t *testing.T, cfg map[string]any) *caasEnv {
	t.Helper()
	d := start(t, nil)
	base := map[string]any{"agent-version": "3.3.0", "workload-storage": "standard"}
	for k, v := range cfg {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	m, err := d.State().AddModel(t.Context(), "k8s", state.ModelTypeCAAS, base)
	if err != nil {
		t.Fatal(err)
	}
	return &caasEnv{t: t, d: d, st: d.State(), model: m.UUID, c: loginController(t, d, m.UUID)}
}

func (e *caasEnv) deploy(name, meta string, scale int, cons map[string]storage.Constraints) {
	e.t.Helper()
	m, err := charm.ParseMeta([]byte(meta))
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.st.AddCAASApplication(context.Background(), e.model, state.CAASApplicationParams{
		Name: name, Charm: state.Charm{URL: "ch:" + m.Name + "-1", Revision: 1, Meta: m,
			Config: map[string]state.CharmOption{"port": {Type: "int", Default: 80.0}}},
		Scale: scale, Storage: cons, PodSpec: "containers: []",
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *caasEnv) call(method string, args, res any) error {
	if res != nil { // a reply decodes into a zero value, not over the last one
		reflect.ValueOf(res).Elem().SetZero()
	}
	return e.c.Call(ctxT(e.t), "CAASUnitProvisioner", 2, "", method, args, res)
}

func (e *caasEnv) mustCall(method string, args, res any) {
	e.t.Helper()
	if err := e.call(method, args, res); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
}

func entities(tags ...string) params.Entities {
	out := params.Entities{Entities: []params.Entity{}}
	for _, t := range tags {
		out.Entities = append(out.Entities, params.Entity{Tag: t})
	}
	return out
}

func (e *caasEnv) update(arg params.UpdateApplicationUnits) params.UpdateApplicationUnitResult {
	e.t.Helper()
	var res params.UpdateApplicationUnitResults
	e.mustCall("UpdateApplicationsUnits", params.UpdateApplicationUnitArgs{Args: []params.UpdateApplicationUnits{arg}}, &res)
	if len(res.Results) != 1 {
		e.t.Fatalf("results = %+v", res)
	}
	return res.Results[0]
}

func (e *caasEnv) units(app string) []state.Unit {
	e.t.Helper()
	us, err := e.st.CAASUnits(context.Background(), e.model, app)
	if err != nil {
		e.t.Fatal(err)
	}
	return us
}

func intp(n int) *int { return &n }

func i64p(n int64) *int64 { return &n }

func errCode(e *params.Error) string {
	if e == nil {
		return "<nil>"
	}
	return e.Message + " (" + e.Code + ")"
}

func TestCAASAccess(t *testing.T) {
	e := newCAAS(t, nil)
	admin := loginAdmin(t, e.d, e.model)
	err := admin.Call(ctxT(t), "CAASUnitProvisioner", 2, "", "WatchApplications", nil, nil)
	wantErr(t, err, "permission denied", params.CodeUnauthorized)
	iaas := loginController(t, e.d, e.d.Credentials().DefaultModelUUID)
	err = iaas.Call(ctxT(t), "CAASUnitProvisioner", 2, "", "ApplicationsScale", entities(), nil)
	wantErr(t, err, "", params.CodeNotSupported)
	var res params.StringsWatchResult
	e.mustCall("WatchApplications", nil, &res)
	if res.StringsWatcherId == "" || len(res.Changes) != 0 {
		t.Fatalf("WatchApplications = %+v", res)
	}
}

func TestCAASReadMethods(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", gitlabMeta, 3, nil)
	e.deploy("mini", "name: mini\ndeployment:\n  mode: operator\n", 0, nil)
	if err := e.st.SetApplicationTrust(t.Context(), e.model, "gitlab", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.AddCAASUnit(t.Context(), e.model, "gitlab", state.CAASUnitParams{}); err != nil {
		t.Fatal(err)
	}
	tags := entities("application-gitlab", "application-mini", "application-nope", "unit-gitlab-0", "bad")
	notFound := `application "nope" not found (not found)`
	badApp := `"unit-gitlab-0" is not a valid application tag ()`
	badTag := `"bad" is not a valid application tag ()`

	var scale params.IntResults
	e.mustCall("ApplicationsScale", tags, &scale)
	var trust params.BoolResults
	e.mustCall("ApplicationsTrust", tags, &trust)
	var mode params.StringResults
	e.mustCall("DeploymentMode", tags, &mode)
	var cfg params.ApplicationGetConfigResults
	e.mustCall("ApplicationsConfig", tags, &cfg)
	for i, want := range []struct {
		scale int
		trust bool
		mode  string
		cfg   map[string]any
		err   string
	}{
		{3, true, "workload", map[string]any{"trust": true}, "<nil>"},
		{0, false, "operator", map[string]any{}, "<nil>"},
		{err: notFound},
		{err: badApp},
		{err: badTag},
	} {
		r := scale.Results[i]
		if r.Result != want.scale || errCode(r.Error) != want.err {
			t.Errorf("ApplicationsScale[%d] = %+v; want %d %s", i, r, want.scale, want.err)
		}
		if b := trust.Results[i]; b.Result != want.trust || errCode(b.Error) != want.err {
			t.Errorf("ApplicationsTrust[%d] = %+v", i, b)
		}
		if m := mode.Results[i]; m.Result != want.mode || errCode(m.Error) != want.err {
			t.Errorf("DeploymentMode[%d] = %+v", i, m)
		}
		if c := cfg.Results[i]; !reflect.DeepEqual(c.Config, want.cfg) || errCode(c.Error) != want.err {
			t.Errorf("ApplicationsConfig[%d] = %+v", i, c)
		}
	}

	var life params.LifeResults
	e.mustCall("Life", entities("application-gitlab", "unit-gitlab-0", "unit-gitlab-9", "machine-0", "bad"), &life)
	wantLife := []string{"alive <nil>", "alive <nil>", ` unit "gitlab/9" not found (not found)`,
		" permission denied (unauthorized access)", " permission denied (unauthorized access)"}
	for i, w := range wantLife {
		if got := life.Results[i].Life + " " + errCode(life.Results[i].Error); got != w {
			t.Errorf("Life[%d] = %q; want %q", i, got, w)
		}
	}

	var ch params.Charm
	e.mustCall("CharmInfo", params.CharmURL{URL: "ch:gitlab-1"}, &ch)
	if ch.URL != "ch:gitlab-1" || ch.Meta.Name != "gitlab" || ch.Meta.Storage["data"].Location != "/var/opt/gitlab" ||
		ch.Meta.Deployment.DeploymentType != "stateful" || ch.Config["port"].Type != "int" || ch.Meta.Devices["gpu"].CountMax != 1 {
		t.Errorf("CharmInfo = %+v", ch)
	}
	var ch2 params.Charm
	e.mustCall("ApplicationCharmInfo", params.Entity{Tag: "application-gitlab"}, &ch2)
	if !reflect.DeepEqual(ch, ch2) {
		t.Errorf("ApplicationCharmInfo = %+v; want %+v", ch2, ch)
	}
	wantErr(t, e.call("CharmInfo", params.CharmURL{URL: "ch:nope"}, &ch), `charm "ch:nope" not found`, params.CodeNotFound)
	wantErr(t, e.call("ApplicationCharmInfo", params.Entity{Tag: "unit-gitlab-0"}, &ch), `"unit-gitlab-0" is not a valid application tag`, "")

	// Empty bulk calls answer empty results.
	var empty params.ErrorResults
	e.mustCall("ClearApplicationsResources", entities(), &empty)
	if empty.Results == nil || len(empty.Results) != 0 {
		t.Errorf("empty = %+v", empty)
	}
}

// gitlab with units 0 (pod uuid), 1 (none), 2 (pod uuid2), 3 (none).
func (e *caasEnv) exampleUnits(pids ...string) {
	e.t.Helper()
	for _, pid := range pids {
		if _, err := e.st.AddCAASUnit(context.Background(), e.model, "gitlab", state.CAASUnitParams{ProviderID: pid}); err != nil {
			e.t.Fatal(err)
		}
	}
}

type unitView struct {
	Name, Life, PID, Agent, Container, ContainerMsg string
}

func (e *caasEnv) view(app string) []unitView {
	var out []unitView
	for _, u := range e.units(app) {
		out = append(out, unitView{u.Name, string(u.Life), u.ProviderID(), u.AgentStatus.Status + "/" + u.AgentStatus.Message,
			u.ContainerStatus.Status, u.ContainerStatus.Message})
	}
	return out
}

func TestCAASUpdateUnitsStateless(t *testing.T) {
	// §4.7 example 1.
	e := newCAAS(t, nil)
	e.deploy("gitlab", "name: gitlab\n", 4, nil)
	e.exampleUnits("uuid", "", "uuid2", "")
	pod := func(id, status, info string) params.ApplicationUnitParams {
		return params.ApplicationUnitParams{ProviderId: id, Address: "10.0.0.1", Ports: []string{"80"}, Status: status, Info: info}
	}
	res := e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(4), Generation: i64p(1),
		Units: []params.ApplicationUnitParams{
			pod("uuid", "allocating", ""), pod("another-uuid", "allocating", "another message"),
			pod("new-uuid", "running", "new message"), pod("really-new-uuid", "running", "really new message"),
		}})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	wantInfo := []params.ApplicationUnitInfo{ui("uuid", "unit-gitlab-0"), ui("another-uuid", "unit-gitlab-1"),
		ui("new-uuid", "unit-gitlab-3"), ui("really-new-uuid", "unit-gitlab-4")}
	if res.Info == nil || !reflect.DeepEqual(res.Info.Units, wantInfo) {
		t.Fatalf("info = %+v", res.Info)
	}
	want := []unitView{
		{"gitlab/0", "alive", "uuid", "allocating/", "waiting", ""},
		{"gitlab/1", "alive", "another-uuid", "allocating/another message", "waiting", "another message"},
		{"gitlab/3", "alive", "new-uuid", "idle/", "running", "new message"},
		{"gitlab/4", "alive", "really-new-uuid", "idle/", "running", "really new message"},
	}
	if got := e.view("gitlab"); !reflect.DeepEqual(got, want) {
		t.Fatalf("units =\n%+v\nwant\n%+v", got, want)
	}
	u, _ := e.st.Unit(t.Context(), e.model, "gitlab/0")
	if u.Container.Address != "10.0.0.1" || !reflect.DeepEqual(u.Container.Ports, []string{"80"}) {
		t.Errorf("container = %+v", u.Container)
	}
	if a, _ := e.st.Application(t.Context(), e.model, "gitlab"); a.Scale != 4 {
		t.Errorf("scale = %d", a.Scale)
	}
}

const storageMeta = `
name: gitlab
storage:
  data:
    type: filesystem
`

func fsInfo(id, status string, vol string, volStatus string) params.KubernetesFilesystemInfo {
	return params.KubernetesFilesystemInfo{StorageName: "data", Size: 100, FilesystemId: id, Status: status,
		MountPoint: "/var/lib/juju/storage/data/0",
		Volume:     params.KubernetesVolumeInfo{VolumeId: vol, Size: 100, Persistent: true, Status: volStatus}}
}

func TestCAASUpdateUnitsWithStorage(t *testing.T) {
	// §4.7 example 2.
	e := newCAAS(t, nil)
	e.deploy("gitlab", storageMeta, 4, nil)
	e.exampleUnits("uuid", "", "gone-uuid", "gone-uuid2")
	res := e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(3),
		Units: []params.ApplicationUnitParams{
			{ProviderId: "uuid", Status: "running", Stateful: true, FilesystemInfo: []params.KubernetesFilesystemInfo{fsInfo("fs-a", "pending", "vol-a", "pending")}},
			{ProviderId: "another-uuid", Status: "running", Stateful: true, FilesystemInfo: []params.KubernetesFilesystemInfo{fsInfo("fs-b", "attached", "vol-b", "attached")}},
		}})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	wantInfo := []params.ApplicationUnitInfo{ui("uuid", "unit-gitlab-0"), ui("another-uuid", "unit-gitlab-1")}
	if res.Info == nil || !reflect.DeepEqual(res.Info.Units, wantInfo) {
		t.Fatalf("info = %+v", res.Info)
	}
	want := []unitView{
		{"gitlab/0", "alive", "uuid", "idle/", "running", ""},
		{"gitlab/1", "alive", "another-uuid", "idle/", "running", ""},
		{"gitlab/3", "alive", "gone-uuid2", "idle/", "terminated", "unit stopped by the cloud"},
	}
	if got := e.view("gitlab"); !reflect.DeepEqual(got, want) {
		t.Fatalf("units =\n%+v\nwant\n%+v", got, want)
	}
	fss, _ := e.st.Filesystems(t.Context(), e.model)
	got := map[string]string{}
	for _, f := range fss {
		s := f.Status.Status
		if f.Info != nil {
			s += " " + f.Info.FilesystemID
		}
		if f.Attachment != nil && f.Attachment.Info != nil {
			s += " at " + f.Attachment.Info.MountPoint
		}
		got[f.ID] = s
	}
	wantFS := map[string]string{
		"gitlab/0/0": "pending",
		"gitlab/1/0": "attached fs-b at /var/lib/juju/storage/data/0",
		"gitlab/2/0": "detached", // the deleted unit's storage, kept
		"gitlab/3/0": "detached",
	}
	if !reflect.DeepEqual(got, wantFS) {
		t.Errorf("filesystems = %v; want %v", got, wantFS)
	}
	vols, _ := e.st.Volumes(t.Context(), e.model)
	gotV := map[string]string{}
	for _, v := range vols {
		s := v.Status.Status
		if v.Info != nil {
			s += " " + v.Info.VolumeID
		}
		gotV[v.ID] = s
	}
	wantV := map[string]string{"0": "pending", "1": "attached vol-b", "2": "pending", "3": "pending"}
	if !reflect.DeepEqual(gotV, wantV) {
		t.Errorf("volumes = %v; want %v", gotV, wantV)
	}
	sis, _ := e.st.StorageInstances(t.Context(), e.model)
	for _, si := range sis {
		if si.ID == "data/2" && (si.Owner != "" || si.Unit != "") {
			t.Errorf("deleted unit's storage still attached: %+v", si)
		}
	}

	// A new pod re-using the deleted unit's volume (fs id) cleans the
	// orphaned storage up.
	res = e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
		Units: []params.ApplicationUnitParams{
			{ProviderId: "reborn", Status: "running", Stateful: true, FilesystemInfo: []params.KubernetesFilesystemInfo{fsInfo("fs-gone", "attached", "vol-gone", "attached")}},
		}})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	// (fs-gone was never recorded for gitlab/2: nothing orphaned yet.)
	if sis2, _ := e.st.StorageInstances(t.Context(), e.model); len(sis2) != len(sis)+1 {
		t.Errorf("storage instances = %d; want %d", len(sis2), len(sis)+1)
	}
}

func TestCAASUpdateUnitsScaleZeroAndEmpty(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", "name: gitlab\n", 2, nil)
	e.exampleUnits("p1", "p2", "")
	// Example 4: an empty event with scale > 0 changes nothing but the
	// operator status.
	rev := e.st.Revision()
	res := e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(2),
		Status: params.EntityStatus{Status: "active", Info: "ok"}, Units: []params.ApplicationUnitParams{}})
	if res.Error != nil || res.Info != nil {
		t.Fatalf("empty event = %+v", res)
	}
	if e.st.Revision() != rev+1 {
		t.Errorf("revision %d -> %d; want one write (the operator status)", rev, e.st.Revision())
	}
	if s, _ := e.st.OperatorStatus(t.Context(), e.model, "gitlab"); s.Status != "active" || s.Message != "ok" {
		t.Errorf("operator status = %+v", s)
	}
	// Example 3: scale 0 and no pods deletes the units with pods, keeps
	// the unassociated one, and sets the scale.
	res = e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(0), Units: []params.ApplicationUnitParams{}})
	if res.Error != nil || res.Info != nil {
		t.Fatalf("scale 0 = %+v", res)
	}
	if got := e.view("gitlab"); len(got) != 1 || got[0].Name != "gitlab/2" {
		t.Errorf("units = %+v", got)
	}
	if a, _ := e.st.Application(t.Context(), e.model, "gitlab"); a.Scale != 0 {
		t.Errorf("scale = %d", a.Scale)
	}
}

func TestCAASStatusMapping(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", "name: gitlab\n", 0, nil)
	for _, tt := range []struct{ status, agent, container string }{
		{"allocating", "allocating/msg", "waiting"},
		{"running", "idle/", "running"},
		{"error", "error/msg", "error"},
		{"blocked", "idle/", "blocked"},
		{"terminated", "allocating/", ""},
		{"", "allocating/", ""},
		{"unknown", "allocating/", "<none>"},
	} {
		t.Run(tt.status, func(t *testing.T) {
			id := "pod-" + tt.status
			res := e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
				Units: []params.ApplicationUnitParams{{ProviderId: id, Status: tt.status, Info: "msg"}}})
			if res.Error != nil || len(res.Info.Units) != 1 {
				t.Fatalf("update = %+v", res)
			}
			u, err := e.st.Unit(t.Context(), e.model, res.Info.Units[0].UnitTag[len("unit-"):len(res.Info.Units[0].UnitTag)-2]+"/"+res.Info.Units[0].UnitTag[len(res.Info.Units[0].UnitTag)-1:])
			if err != nil {
				t.Fatal(err)
			}
			cs := u.ContainerStatus.Status
			if u.ContainerStatus.Since.IsZero() {
				cs = "<none>"
			}
			if got := u.AgentStatus.Status + "/" + u.AgentStatus.Message; got != tt.agent || cs != tt.container {
				t.Errorf("agent %q container %q; want %q %q", got, cs, tt.agent, tt.container)
			}
		})
	}
}

func TestCAASUpdateUnitsBadInput(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", storageMeta, 1, nil)
	e.deploy("other", "name: other\n", 1, nil)
	e.exampleUnits("p0")
	good := params.ApplicationUnitParams{ProviderId: "p0", Status: "running", Stateful: true}
	for _, tt := range []struct {
		name string
		arg  params.UpdateApplicationUnits
		err  string
	}{
		{"unknown application", params.UpdateApplicationUnits{ApplicationTag: "application-nope", Units: []params.ApplicationUnitParams{good}},
			`application "nope" not found (not found)`},
		{"not an application tag", params.UpdateApplicationUnits{ApplicationTag: "unit-gitlab-0"},
			`"unit-gitlab-0" is not a valid application tag ()`},
		{"unit of another application", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
			Units: []params.ApplicationUnitParams{good, {ProviderId: "p9", UnitTag: "unit-other-0", Status: "running"}}},
			`unit "other/0" of pod "p9" is not a unit of application "gitlab" (not valid)`},
		{"malformed unit tag", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
			Units: []params.ApplicationUnitParams{{ProviderId: "p9", UnitTag: "machine-0"}}},
			`"machine-0" is not a valid unit tag ()`},
		{"negative scale", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(-1),
			Status: params.EntityStatus{Status: "active"}, Units: []params.ApplicationUnitParams{good}},
			`application scale -1 not valid (not valid)`},
		{"storage the charm lacks", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
			Units: []params.ApplicationUnitParams{{ProviderId: "p0", Status: "running",
				FilesystemInfo: []params.KubernetesFilesystemInfo{{StorageName: "logs", FilesystemId: "x", Status: "attached"}}}}},
			`filesystem info of pod "p0" names storage "logs" that charm "ch:gitlab-1" does not have (not valid)`},
		{"filesystem status outside the rules", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
			Status: params.EntityStatus{Status: "active"},
			Units: []params.ApplicationUnitParams{{ProviderId: "p0", Status: "running",
				FilesystemInfo: []params.KubernetesFilesystemInfo{fsInfo("fs", "mounted", "v", "attached")}}}},
			`updating filesystem information for gitlab: filesystem "gitlab/0/0": cannot set invalid status "mounted" ()`},
		{"volume status outside the rules", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
			Units: []params.ApplicationUnitParams{{ProviderId: "p0", Status: "running",
				FilesystemInfo: []params.KubernetesFilesystemInfo{fsInfo("fs", "attached", "v", "sideways")}}}},
			`updating volume information for gitlab: volume 0: cannot set invalid status "sideways" ()`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rev := e.st.Revision()
			res := e.update(tt.arg)
			if got := errCode(res.Error); got != tt.err {
				t.Fatalf("error = %s\nwant    %s", got, tt.err)
			}
			if e.st.Revision() != rev {
				t.Errorf("revision %d -> %d: a failed update changed state", rev, e.st.Revision())
			}
		})
	}
}

func TestCAASScaleRules(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", "name: gitlab\n", 1, nil)
	pods := []params.ApplicationUnitParams{{ProviderId: "a", Status: "running"}, {ProviderId: "b", Status: "running"}}
	res := e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(2), Generation: i64p(5), Units: pods})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	// An older generation is refused (forbidden) but the units are still
	// updated and named.
	res = e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(3), Generation: i64p(4),
		Units: append(pods, params.ApplicationUnitParams{ProviderId: "c", Status: "running"})})
	if errCode(res.Error) != "application generation 5 can not be reverted to 4 (forbidden)" || res.Info == nil || len(res.Info.Units) != 3 {
		t.Fatalf("revert = %s %+v", errCode(res.Error), res.Info)
	}
	// The operator's scale is protected until the cluster reports it.
	if err := e.st.SetApplicationScale(t.Context(), e.model, "gitlab", 5); err != nil {
		t.Fatal(err)
	}
	res = e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(3), Generation: i64p(6), Units: pods})
	if errCode(res.Error) != "SetScale(3) without force while desired scale 5 is not applied yet (forbidden)" {
		t.Fatalf("protected = %s", errCode(res.Error))
	}
	var svc params.ErrorResults
	e.mustCall("UpdateApplicationsService", params.UpdateApplicationServiceArgs{Args: []params.UpdateApplicationServiceArg{
		{ApplicationTag: "application-gitlab", ProviderId: "svc-1", Addresses: []params.Address{{Value: "10.1.1.1", Type: "ipv4", Scope: "local-cloud"}}, Scale: intp(5), Generation: i64p(7)},
		{ApplicationTag: "application-gitlab", Addresses: []params.Address{{Value: "10.1.1.2", SpaceName: "nope"}}, Scale: intp(9)},
		{ApplicationTag: "application-nope"},
	}}, &svc)
	wantSvc := []string{"<nil>", `space with name "nope" not found (not found)`, `application "nope" not found (not found)`}
	for i, w := range wantSvc {
		if got := errCode(svc.Results[i].Error); got != w {
			t.Errorf("UpdateApplicationsService[%d] = %s; want %s", i, got, w)
		}
	}
	cs, _ := e.st.CloudService(t.Context(), e.model, "gitlab")
	if cs.ProviderID != "svc-1" || len(cs.Addresses) != 1 || cs.Generation != 7 || cs.DesiredScaleProtected {
		t.Errorf("cloud service = %+v", cs)
	}
	// Now scale reports from the cluster are accepted again.
	res = e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(2), Generation: i64p(8), Units: pods})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	if a, _ := e.st.Application(t.Context(), e.model, "gitlab"); a.Scale != 2 {
		t.Errorf("scale = %d", a.Scale)
	}

	// SetOperatorStatus and ClearApplicationsResources.
	var st params.ErrorResults
	e.mustCall("SetOperatorStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
		{Tag: "application-gitlab", Status: "error", Info: "boom", Data: map[string]any{"k": "v"}}, {Tag: "application-nope"}}}, &st)
	if st.Results[0].Error != nil || errCode(st.Results[1].Error) != `application "nope" not found (not found)` {
		t.Errorf("SetOperatorStatus = %+v", st)
	}
	if s, _ := e.st.OperatorStatus(t.Context(), e.model, "gitlab"); s.Status != "error" || s.Message != "boom" || s.Data["k"] != "v" {
		t.Errorf("operator status = %+v", s)
	}
	var clr params.ErrorResults
	e.mustCall("ClearApplicationsResources", entities("application-gitlab"), &clr)
	if errCode(clr.Results[0].Error) != `application "gitlab" is alive ()` {
		t.Errorf("clear alive = %+v", clr)
	}
	// Destroyed, its units go at once (no unit agents are modelled) and it
	// is dead, waiting for its cluster resources to be deleted.
	if res, err := e.st.DestroyApplication(t.Context(), e.model, "gitlab", false); err != nil || res.Life != state.Dead || len(res.Units) == 0 {
		t.Fatalf("DestroyApplication = %+v, %v", res, err)
	}
	// Updates of a dead application are ignored; its scale refused.
	res = e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: intp(7), Generation: i64p(9), Units: pods})
	if errCode(res.Error) != `cannot set scale for application "gitlab" to 7: application "gitlab" is not alive ()` {
		t.Errorf("dead = %s", errCode(res.Error))
	}
	var life params.LifeResults
	e.mustCall("Life", entities("application-gitlab"), &life)
	if life.Results[0].Life != "dead" {
		t.Errorf("Life = %+v", life)
	}
	// Clearing a dead application's cluster resources removes it; its
	// units' storage stays, detached.
	e.mustCall("ClearApplicationsResources", entities("application-gitlab"), &clr)
	if _, err := e.st.Application(t.Context(), e.model, "gitlab"); clr.Results[0].Error != nil || !jujuerrors.Is(err, jujuerrors.NotFound) {
		t.Errorf("clear dead = %+v; application: %v", clr, err)
	}
	if units, err := e.st.CAASUnits(t.Context(), e.model, "gitlab"); err != nil || len(units) != 0 {
		t.Errorf("units after clearing = %v, %v", units, err)
	}
	if _, err := e.st.K8sSpec(t.Context(), e.model, "gitlab"); !jujuerrors.Is(err, jujuerrors.NotFound) {
		t.Errorf("pod spec after clearing: %v", err)
	}
	e.mustCall("ClearApplicationsResources", entities("application-gitlab"), &clr)
	if errCode(clr.Results[0].Error) != `application "gitlab" not found (not found)` {
		t.Errorf("clear removed = %+v", clr)
	}
}

func TestCAASProvisioningInfo(t *testing.T) {
	e := newCAAS(t, map[string]any{"resource-tags": "owner=ops"})
	// A reserved tag (refused when set since config is checked; an older
	// store may hold one) loses to the controller's own.
	model, err := e.st.Model(t.Context(), e.model)
	if err != nil {
		t.Fatal(err)
	}
	model.Config["resource-tags"] = "owner=ops juju-model-uuid=spoof"
	writeModelConfigs(t, e.d, map[string]map[string]any{e.model: model.Config}, "")
	if err := e.st.UpdateControllerConfig(t.Context(), map[string]any{"caas-image-repo": `{"repository":"reg.example/juju","username":"u","password":"p","serveraddress":"reg.example"}`}, nil); err != nil {
		t.Fatal(err)
	}
	mgr, err := e.st.StorageManager(t.Context(), e.model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Create("fast", storage.ProviderKubernetes, map[string]any{"storage-class": "ssd"}); err != nil {
		t.Fatal(err)
	}
	meta := gitlabMeta + "  logs:\n    type: filesystem\n    multiple:\n      range: 0-2\n"
	meta = `
name: gitlab
storage:
  data:
    type: filesystem
    location: /var/opt/gitlab
  logs:
    type: filesystem
    multiple:
      range: 0-2
deployment:
  type: stateful
  service: loadbalancer
devices:
  gpu:
    type: nvidia.com/gpu
  fpga:
    type: xilinx/fpga
`
	m, _ := charm.ParseMeta([]byte(meta))
	mem := uint64(2048)
	arch := "arm64"
	if err := e.st.SetModelConstraints(t.Context(), e.model, state.Constraints{Mem: &mem, Arch: &arch}); err != nil {
		t.Fatal(err)
	}
	cores := uint64(4)
	_, err = e.st.AddCAASApplication(t.Context(), e.model, state.CAASApplicationParams{Name: "gitlab",
		Charm: state.Charm{URL: "ch:gitlab-1", Meta: m}, CharmModifiedVersion: 3, Scale: 1,
		Constraints: state.Constraints{Cores: &cores, Arch: ptr("amd64")},
		Storage:     map[string]storage.Constraints{"data": {Pool: "fast", Size: 10240}, "logs": {Count: 2, Size: 100}},
		Devices: map[string]state.DeviceConstraints{"gpu": {Type: "nvidia.com/gpu", Count: 2, Attributes: map[string]string{"gpu": "tesla"}},
			"fpga": {Type: "xilinx/fpga", Count: 1}},
		PodSpec: "spec"})
	if err != nil {
		t.Fatal(err)
	}
	e.deploy("nospec", "name: nospec\n", 1, nil)
	e.st.AddCAASApplication(t.Context(), e.model, state.CAASApplicationParams{Name: "both", Charm: state.Charm{URL: "ch:x", Meta: &charm.Meta{Name: "x"}}, PodSpec: "a", RawSpec: "b"})
	if err := e.st.SetRawK8sSpec(t.Context(), e.model, "nospec", ""); err != nil {
		t.Fatal(err)
	}
	var res params.KubernetesProvisioningInfoResults
	e.mustCall("ProvisioningInfo", entities("application-gitlab", "application-both", "application-nope", "unit-gitlab-0"), &res)
	ctrl, _ := e.st.Controller(t.Context())
	tags := map[string]string{"owner": "ops", "juju-model-uuid": e.model, "juju-controller-uuid": ctrl.UUID}
	fsTags := map[string]string{"owner": "ops", "juju-model-uuid": e.model, "juju-controller-uuid": ctrl.UUID, "juju-storage-owner": "gitlab"}
	want := &params.KubernetesProvisioningInfo{
		DeploymentInfo: &params.KubernetesDeploymentInfo{DeploymentType: "stateful", ServiceType: "loadbalancer"},
		PodSpec:        "spec",
		Constraints:    params.Value{Arch: ptr("amd64"), CpuCores: &cores, Mem: &mem},
		Tags:           tags,
		Filesystems: []params.KubernetesFilesystemParams{
			{StorageName: "data", Size: 10240, Provider: "kubernetes", Attributes: map[string]any{"storage-class": "ssd"}, Tags: fsTags,
				Attachment: &params.KubernetesFilesystemAttachmentParams{Provider: "kubernetes", MountPoint: "/var/opt/gitlab"}},
			{StorageName: "logs", Size: 100, Provider: "kubernetes", Attributes: map[string]any{"storage-class": "standard"}, Tags: fsTags,
				Attachment: &params.KubernetesFilesystemAttachmentParams{Provider: "kubernetes", MountPoint: "/var/lib/juju/storage/logs/0"}},
			{StorageName: "logs", Size: 100, Provider: "kubernetes", Attributes: map[string]any{"storage-class": "standard"}, Tags: fsTags,
				Attachment: &params.KubernetesFilesystemAttachmentParams{Provider: "kubernetes", MountPoint: "/var/lib/juju/storage/logs/1"}},
		},
		Devices: []params.KubernetesDeviceParams{{Type: "xilinx/fpga", Count: 1},
			{Type: "nvidia.com/gpu", Count: 2, Attributes: map[string]string{"gpu": "tesla"}}},
		CharmModifiedVersion: 3,
		ImageRepo: params.DockerImageInfo{RegistryPath: "reg.example/juju/jujud-operator:3.3.0", Username: "u", Password: "p",
			Repository: "reg.example/juju"},
	}
	if res.Results[0].Error != nil || !reflect.DeepEqual(res.Results[0].Result, want) {
		a, _ := json.MarshalIndent(res.Results[0], "", " ")
		b, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("gitlab =\n%s\nwant\n%s", a, b)
	}
	for i, w := range []string{"", "both k8s spec and raw k8s spec were set ()", `k8s spec for application nope not found (not found)`,
		`"unit-gitlab-0" is not a valid application tag ()`} {
		if i > 0 && (errCode(res.Results[i].Error) != w || res.Results[i].Result != nil) {
			t.Errorf("ProvisioningInfo[%d] = %s %+v; want %s", i, errCode(res.Results[i].Error), res.Results[i].Result, w)
		}
	}

	// No pool and no model default storage class; no agent version; a
	// plain image repository.
	if err := e.st.UpdateModelConfig(t.Context(), e.model, nil, []string{"workload-storage"}); err != nil {
		t.Fatal(err)
	}
	e.mustCall("ProvisioningInfo", entities("application-gitlab"), &res)
	if got := errCode(res.Results[0].Error); got != `getting filesystem "logs" parameters: storage pool for "logs" must be specified since there's no model default storage class ()` {
		t.Errorf("no storage class = %s", got)
	}
	if err := e.st.UpdateModelConfig(t.Context(), e.model, map[string]any{"workload-storage": "standard"}, []string{"agent-version"}); err != nil {
		t.Fatal(err)
	}
	e.mustCall("ProvisioningInfo", entities("application-gitlab"), &res)
	if got := errCode(res.Results[0].Error); got != `agent version is missing in model config "k8s" (not valid)` {
		t.Errorf("no agent version = %s", got)
	}
	if err := e.st.UpdateModelConfig(t.Context(), e.model, map[string]any{"agent-version": "3.3.1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.st.UpdateControllerConfig(t.Context(), map[string]any{"caas-image-repo": "plain.example/ops"}, nil); err != nil {
		t.Fatal(err)
	}
	e.mustCall("ProvisioningInfo", entities("application-gitlab"), &res)
	if r := res.Results[0]; r.Error != nil || r.Result.ImageRepo != (params.DockerImageInfo{RegistryPath: "plain.example/ops/jujud-operator:3.3.1", Repository: "plain.example/ops"}) {
		t.Errorf("plain repo = %+v %v", r.Result, r.Error)
	}
	// A pool name that is a provider type resolves to the provider.
	if cfg, err := mgr.Get("tmpfs"); err != nil || cfg.Provider != storage.ProviderTmpfs {
		t.Errorf("Get(tmpfs) = %+v, %v", cfg, err)
	}
}

func ptr[T any](v T) *T { return &v }

func ui(pid, tag string) params.ApplicationUnitInfo {
	return params.ApplicationUnitInfo{ProviderId: pid, UnitTag: tag}
}

// nextWithin reports whether a notify watcher fires within d.
func nextWithin(t *testing.T, w *client.NotifyWatcher, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), d)
	defer cancel()
	err := w.Next(ctx)
	if err == nil {
		return true
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %v", err)
	}
	return false
}

func TestCAASWatchers(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", "name: gitlab\n", 1, nil)
	var apps params.StringsWatchResult
	e.mustCall("WatchApplications", nil, &apps)
	if !reflect.DeepEqual(apps.Changes, []string{"gitlab"}) {
		t.Fatalf("initial = %v", apps.Changes)
	}
	watch := func(method string) *client.NotifyWatcher {
		var res params.NotifyWatchResults
		e.mustCall(method, entities("application-gitlab", "application-nope", "unit-gitlab-0"), &res)
		if res.Results[0].Error != nil || res.Results[0].NotifyWatcherId == "" {
			t.Fatalf("%s = %+v", method, res)
		}
		return client.NewNotifyWatcher(e.c, res.Results[0].NotifyWatcherId)
	}
	entity, scale, spec := watch("Watch"), watch("WatchApplicationsScale"), watch("WatchPodSpec")
	var res params.NotifyWatchResults
	e.mustCall("Watch", entities("application-nope", "unit-gitlab-0"), &res)
	if errCode(res.Results[0].Error) != `application "nope" not found (not found)` || errCode(res.Results[1].Error) != "permission denied (unauthorized access)" {
		t.Errorf("Watch errors = %+v", res)
	}
	e.mustCall("WatchPodSpec", entities("application-nope", "unit-gitlab-0"), &res)
	if res.Results[0].Error != nil || errCode(res.Results[1].Error) != `"unit-gitlab-0" is not a valid application tag ()` {
		t.Errorf("WatchPodSpec errors = %+v", res)
	}
	var hashes params.StringsWatchResults
	e.mustCall("WatchApplicationsTrustHash", entities("application-gitlab"), &hashes)
	if hashes.Results[0].Error != nil || hashes.Results[0].Changes != nil {
		t.Fatalf("WatchApplicationsTrustHash = %+v", hashes)
	}
	hash := client.NewStringsWatcher(e.c, hashes.Results[0].StringsWatcherId)
	appsW := client.NewStringsWatcher(e.c, apps.StringsWatcherId)
	const quiet = 100 * time.Millisecond

	// The pod spec fires the spec watcher only.
	if err := e.st.SetPodSpec(t.Context(), e.model, "gitlab", "new spec"); err != nil {
		t.Fatal(err)
	}
	if !nextWithin(t, spec, 5*time.Second) {
		t.Error("spec watcher did not fire")
	}
	// Trust fires the hash watcher only, with the new hash.
	if err := e.st.SetApplicationTrust(t.Context(), e.model, "gitlab", true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	got, err := hash.Next(ctx)
	cancel()
	want, _ := e.st.ApplicationConfigHash(t.Context(), e.model, "gitlab")
	if err != nil || !reflect.DeepEqual(got, []string{want}) {
		t.Errorf("hash Next = %v, %v; want [%s]", got, err, want)
	}
	// Setting the same trust again changes no hash.
	if err := e.st.SetApplicationTrust(t.Context(), e.model, "gitlab", true); err != nil {
		t.Fatal(err)
	}
	// Scale fires the entity and scale watchers.
	if err := e.st.SetApplicationScale(t.Context(), e.model, "gitlab", 3); err != nil {
		t.Fatal(err)
	}
	if !nextWithin(t, scale, 5*time.Second) || !nextWithin(t, entity, 5*time.Second) {
		t.Error("scale/entity watcher did not fire on scale")
	}
	// Constraints fire the entity watcher but not the scale watcher.
	if err := e.st.SetApplicationConstraints(t.Context(), e.model, "gitlab", state.Constraints{Mem: ptr(uint64(1))}); err != nil {
		t.Fatal(err)
	}
	if !nextWithin(t, entity, 5*time.Second) {
		t.Error("entity watcher did not fire on constraints")
	}
	// Unit updates fire none of them; a new application fires the
	// lifecycle watcher.
	e.update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Units: []params.ApplicationUnitParams{{ProviderId: "x", Status: "running"}}})
	e.deploy("other", "name: other\n", 1, nil)
	ctx, cancel = context.WithTimeout(ctxT(t), 5*time.Second)
	got, err = appsW.Next(ctx)
	cancel()
	if err != nil || !reflect.DeepEqual(got, []string{"other"}) {
		t.Errorf("applications Next = %v, %v", got, err)
	}
	if _, err := e.st.DestroyApplication(t.Context(), e.model, "gitlab", false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(ctxT(t), 5*time.Second)
	got, err = appsW.Next(ctx)
	cancel()
	if err != nil || !reflect.DeepEqual(got, []string{"gitlab"}) {
		t.Errorf("applications Next after destroy = %v, %v", got, err)
	}
	if !nextWithin(t, entity, 5*time.Second) {
		t.Error("entity watcher did not fire on life")
	}
	for name, w := range map[string]*client.NotifyWatcher{"scale": scale, "spec": spec} {
		if nextWithin(t, w, quiet) {
			t.Errorf("%s watcher fired on what it does not watch", name)
		}
	}
	ctx, cancel = context.WithTimeout(ctxT(t), quiet)
	got, err = hash.Next(ctx)
	cancel()
	if err == nil {
		t.Errorf("hash watcher fired without a config change: %v", got)
	}
}

// TestCAASEndToEnd runs the unit provisioner's loop against operator
// steps: the deploy made through state, the scale through ModelAdmin (as
// provisionctl scale), and what provisionctl status shows through
// ModelAdmin.Status.
