package caasunitprovisioner_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

// CAASUnitProvisioner v2 through the real RPC stack on real bbolt.

func TestMain(m *testing.M) { leaktest.Main(m) }

// caasEnv is internal/testkit's CAASEnv with this package's own helpers.
type caasEnv struct{ *testkit.CAASEnv }

func newCAAS(t *testing.T, cfg map[string]any) *caasEnv { return &caasEnv{testkit.NewCAAS(t, cfg)} }

func (e *caasEnv) units(app string) []state.Unit {
	e.T.Helper()
	us, err := e.St.CAASUnits(context.Background(), e.Model, app)
	if err != nil {
		e.T.Fatal(err)
	}
	return us
}

func errCode(e *params.Error) string {
	if e == nil {
		return "<nil>"
	}
	return e.Message + " (" + e.Code + ")"
}

func TestCAASAccess(t *testing.T) {
	e := newCAAS(t, nil)
	admin := testkit.LoginAdmin(t, e.D, e.Model)
	err := admin.Call(testkit.Ctx(t), "CAASUnitProvisioner", 2, "", "WatchApplications", nil, nil)
	testkit.WantErr(t, err, "permission denied", params.CodeUnauthorized)
	iaas := testkit.LoginController(t, e.D, e.D.Credentials().DefaultModelUUID)
	err = iaas.Call(testkit.Ctx(t), "CAASUnitProvisioner", 2, "", "ApplicationsScale", testkit.Ents(), nil)
	testkit.WantErr(t, err, "", params.CodeNotSupported)
	var res params.StringsWatchResult
	e.MustCall("WatchApplications", nil, &res)
	if res.StringsWatcherId == "" || len(res.Changes) != 0 {
		t.Fatalf("WatchApplications = %+v", res)
	}
}

func TestCAASReadMethods(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", testkit.GitlabMeta, 3, nil)
	e.Deploy("mini", "name: mini\ndeployment:\n  mode: operator\n", 0, nil)
	if err := e.St.SetApplicationTrust(t.Context(), e.Model, "gitlab", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.St.AddCAASUnit(t.Context(), e.Model, "gitlab", state.CAASUnitParams{}); err != nil {
		t.Fatal(err)
	}
	tags := testkit.Ents("application-gitlab", "application-mini", "application-nope", "unit-gitlab-0", "bad")
	notFound := `application "nope" not found (not found)`
	badApp := `"unit-gitlab-0" is not a valid application tag ()`
	badTag := `"bad" is not a valid application tag ()`

	var scale params.IntResults
	e.MustCall("ApplicationsScale", tags, &scale)
	var trust params.BoolResults
	e.MustCall("ApplicationsTrust", tags, &trust)
	var mode params.StringResults
	e.MustCall("DeploymentMode", tags, &mode)
	var cfg params.ApplicationGetConfigResults
	e.MustCall("ApplicationsConfig", tags, &cfg)
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
	e.MustCall("Life", testkit.Ents("application-gitlab", "unit-gitlab-0", "unit-gitlab-9", "machine-0", "bad"), &life)
	wantLife := []string{"alive <nil>", "alive <nil>", ` unit "gitlab/9" not found (not found)`,
		" permission denied (unauthorized access)", " permission denied (unauthorized access)"}
	for i, w := range wantLife {
		if got := life.Results[i].Life + " " + errCode(life.Results[i].Error); got != w {
			t.Errorf("Life[%d] = %q; want %q", i, got, w)
		}
	}

	var ch params.Charm
	e.MustCall("CharmInfo", params.CharmURL{URL: "ch:gitlab-1"}, &ch)
	if ch.URL != "ch:gitlab-1" || ch.Meta.Name != "gitlab" || ch.Meta.Storage["data"].Location != "/var/opt/gitlab" ||
		ch.Meta.Deployment.DeploymentType != "stateful" || ch.Config["port"].Type != "int" || ch.Meta.Devices["gpu"].CountMax != 1 {
		t.Errorf("CharmInfo = %+v", ch)
	}
	var ch2 params.Charm
	e.MustCall("ApplicationCharmInfo", params.Entity{Tag: "application-gitlab"}, &ch2)
	if !reflect.DeepEqual(ch, ch2) {
		t.Errorf("ApplicationCharmInfo = %+v; want %+v", ch2, ch)
	}
	testkit.WantErr(t, e.Call("CharmInfo", params.CharmURL{URL: "ch:nope"}, &ch), `charm "ch:nope" not found`, params.CodeNotFound)
	testkit.WantErr(t, e.Call("ApplicationCharmInfo", params.Entity{Tag: "unit-gitlab-0"}, &ch), `"unit-gitlab-0" is not a valid application tag`, "")

	// Empty bulk calls answer empty results.
	var empty params.ErrorResults
	e.MustCall("ClearApplicationsResources", testkit.Ents(), &empty)
	if empty.Results == nil || len(empty.Results) != 0 {
		t.Errorf("empty = %+v", empty)
	}
}

// gitlab with units 0 (pod uuid), 1 (none), 2 (pod uuid2), 3 (none).
func (e *caasEnv) exampleUnits(pids ...string) {
	e.T.Helper()
	for _, pid := range pids {
		if _, err := e.St.AddCAASUnit(context.Background(), e.Model, "gitlab", state.CAASUnitParams{ProviderID: pid}); err != nil {
			e.T.Fatal(err)
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
	e.Deploy("gitlab", "name: gitlab\n", 4, nil)
	e.exampleUnits("uuid", "", "uuid2", "")
	pod := func(id, status, info string) params.ApplicationUnitParams {
		return params.ApplicationUnitParams{ProviderId: id, Address: "10.0.0.1", Ports: []string{"80"}, Status: status, Info: info}
	}
	res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](4), Generation: testkit.Ptr[int64](1),
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
	u, _ := e.St.Unit(t.Context(), e.Model, "gitlab/0")
	if u.Container.Address != "10.0.0.1" || !reflect.DeepEqual(u.Container.Ports, []string{"80"}) {
		t.Errorf("container = %+v", u.Container)
	}
	if a, _ := e.St.Application(t.Context(), e.Model, "gitlab"); a.Scale != 4 {
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
	e.Deploy("gitlab", storageMeta, 4, nil)
	e.exampleUnits("uuid", "", "gone-uuid", "gone-uuid2")
	res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](3),
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
	fss, _ := e.St.Filesystems(t.Context(), e.Model)
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
	vols, _ := e.St.Volumes(t.Context(), e.Model)
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
	sis, _ := e.St.StorageInstances(t.Context(), e.Model)
	for _, si := range sis {
		if si.ID == "data/2" && (si.Owner != "" || si.Unit != "") {
			t.Errorf("deleted unit's storage still attached: %+v", si)
		}
	}

	// A new pod re-using the deleted unit's volume (fs id) cleans the
	// orphaned storage up.
	res = e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
		Units: []params.ApplicationUnitParams{
			{ProviderId: "reborn", Status: "running", Stateful: true, FilesystemInfo: []params.KubernetesFilesystemInfo{fsInfo("fs-gone", "attached", "vol-gone", "attached")}},
		}})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	// (fs-gone was never recorded for gitlab/2: nothing orphaned yet.)
	if sis2, _ := e.St.StorageInstances(t.Context(), e.Model); len(sis2) != len(sis)+1 {
		t.Errorf("storage instances = %d; want %d", len(sis2), len(sis)+1)
	}
}

func TestCAASUpdateUnitsScaleZeroAndEmpty(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", "name: gitlab\n", 2, nil)
	e.exampleUnits("p1", "p2", "")
	// Example 4: an empty event with scale > 0 changes nothing but the
	// operator status.
	rev := e.St.Revision()
	res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](2),
		Status: params.EntityStatus{Status: "active", Info: "ok"}, Units: []params.ApplicationUnitParams{}})
	if res.Error != nil || res.Info != nil {
		t.Fatalf("empty event = %+v", res)
	}
	if e.St.Revision() != rev+1 {
		t.Errorf("revision %d -> %d; want one write (the operator status)", rev, e.St.Revision())
	}
	if s, _ := e.St.OperatorStatus(t.Context(), e.Model, "gitlab"); s.Status != "active" || s.Message != "ok" {
		t.Errorf("operator status = %+v", s)
	}
	// Example 3: scale 0 and no pods deletes the units with pods, keeps
	// the unassociated one, and sets the scale.
	res = e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](0), Units: []params.ApplicationUnitParams{}})
	if res.Error != nil || res.Info != nil {
		t.Fatalf("scale 0 = %+v", res)
	}
	if got := e.view("gitlab"); len(got) != 1 || got[0].Name != "gitlab/2" {
		t.Errorf("units = %+v", got)
	}
	if a, _ := e.St.Application(t.Context(), e.Model, "gitlab"); a.Scale != 0 {
		t.Errorf("scale = %d", a.Scale)
	}
}

func TestCAASStatusMapping(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", "name: gitlab\n", 0, nil)
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
			res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab",
				Units: []params.ApplicationUnitParams{{ProviderId: id, Status: tt.status, Info: "msg"}}})
			if res.Error != nil || len(res.Info.Units) != 1 {
				t.Fatalf("update = %+v", res)
			}
			u, err := e.St.Unit(t.Context(), e.Model, res.Info.Units[0].UnitTag[len("unit-"):len(res.Info.Units[0].UnitTag)-2]+"/"+res.Info.Units[0].UnitTag[len(res.Info.Units[0].UnitTag)-1:])
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
	e.Deploy("gitlab", storageMeta, 1, nil)
	e.Deploy("other", "name: other\n", 1, nil)
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
		{"negative scale", params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](-1),
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
			rev := e.St.Revision()
			res := e.Update(tt.arg)
			if got := errCode(res.Error); got != tt.err {
				t.Fatalf("error = %s\nwant    %s", got, tt.err)
			}
			if e.St.Revision() != rev {
				t.Errorf("revision %d -> %d: a failed update changed state", rev, e.St.Revision())
			}
		})
	}
}

func TestCAASScaleRules(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", "name: gitlab\n", 1, nil)
	pods := []params.ApplicationUnitParams{{ProviderId: "a", Status: "running"}, {ProviderId: "b", Status: "running"}}
	res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](2), Generation: testkit.Ptr[int64](5), Units: pods})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	// An older generation is refused (forbidden) but the units are still
	// updated and named.
	res = e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](3), Generation: testkit.Ptr[int64](4),
		Units: append(pods, params.ApplicationUnitParams{ProviderId: "c", Status: "running"})})
	if errCode(res.Error) != "application generation 5 can not be reverted to 4 (forbidden)" || res.Info == nil || len(res.Info.Units) != 3 {
		t.Fatalf("revert = %s %+v", errCode(res.Error), res.Info)
	}
	// The operator's scale is protected until the cluster reports it.
	if err := e.St.SetApplicationScale(t.Context(), e.Model, "gitlab", 5); err != nil {
		t.Fatal(err)
	}
	res = e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](3), Generation: testkit.Ptr[int64](6), Units: pods})
	if errCode(res.Error) != "SetScale(3) without force while desired scale 5 is not applied yet (forbidden)" {
		t.Fatalf("protected = %s", errCode(res.Error))
	}
	var svc params.ErrorResults
	e.MustCall("UpdateApplicationsService", params.UpdateApplicationServiceArgs{Args: []params.UpdateApplicationServiceArg{
		{ApplicationTag: "application-gitlab", ProviderId: "svc-1", Addresses: []params.Address{{Value: "10.1.1.1", Type: "ipv4", Scope: "local-cloud"}}, Scale: testkit.Ptr[int](5), Generation: testkit.Ptr[int64](7)},
		{ApplicationTag: "application-gitlab", Addresses: []params.Address{{Value: "10.1.1.2", SpaceName: "nope"}}, Scale: testkit.Ptr[int](9)},
		{ApplicationTag: "application-nope"},
	}}, &svc)
	wantSvc := []string{"<nil>", `space with name "nope" not found (not found)`, `application "nope" not found (not found)`}
	for i, w := range wantSvc {
		if got := errCode(svc.Results[i].Error); got != w {
			t.Errorf("UpdateApplicationsService[%d] = %s; want %s", i, got, w)
		}
	}
	cs, _ := e.St.CloudService(t.Context(), e.Model, "gitlab")
	if cs.ProviderID != "svc-1" || len(cs.Addresses) != 1 || cs.Generation != 7 || cs.DesiredScaleProtected {
		t.Errorf("cloud service = %+v", cs)
	}
	// Now scale reports from the cluster are accepted again.
	res = e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](2), Generation: testkit.Ptr[int64](8), Units: pods})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	if a, _ := e.St.Application(t.Context(), e.Model, "gitlab"); a.Scale != 2 {
		t.Errorf("scale = %d", a.Scale)
	}

	// SetOperatorStatus and ClearApplicationsResources.
	var st params.ErrorResults
	e.MustCall("SetOperatorStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
		{Tag: "application-gitlab", Status: "error", Info: "boom", Data: map[string]any{"k": "v"}}, {Tag: "application-nope"}}}, &st)
	if st.Results[0].Error != nil || errCode(st.Results[1].Error) != `application "nope" not found (not found)` {
		t.Errorf("SetOperatorStatus = %+v", st)
	}
	if s, _ := e.St.OperatorStatus(t.Context(), e.Model, "gitlab"); s.Status != "error" || s.Message != "boom" || s.Data["k"] != "v" {
		t.Errorf("operator status = %+v", s)
	}
	var clr params.ErrorResults
	e.MustCall("ClearApplicationsResources", testkit.Ents("application-gitlab"), &clr)
	if errCode(clr.Results[0].Error) != `application "gitlab" is alive ()` {
		t.Errorf("clear alive = %+v", clr)
	}
	// Destroyed, its units go at once (no unit agents are modelled) and it
	// is dead, waiting for its cluster resources to be deleted.
	if res, err := e.St.DestroyApplication(t.Context(), e.Model, "gitlab", false); err != nil || res.Life != state.Dead || len(res.Units) == 0 {
		t.Fatalf("DestroyApplication = %+v, %v", res, err)
	}
	// Updates of a dead application are ignored; its scale refused.
	res = e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Scale: testkit.Ptr[int](7), Generation: testkit.Ptr[int64](9), Units: pods})
	if errCode(res.Error) != `cannot set scale for application "gitlab" to 7: application "gitlab" is not alive ()` {
		t.Errorf("dead = %s", errCode(res.Error))
	}
	var life params.LifeResults
	e.MustCall("Life", testkit.Ents("application-gitlab"), &life)
	if life.Results[0].Life != "dead" {
		t.Errorf("Life = %+v", life)
	}
	// Clearing a dead application's cluster resources removes it; its
	// units' storage stays, detached.
	e.MustCall("ClearApplicationsResources", testkit.Ents("application-gitlab"), &clr)
	if _, err := e.St.Application(t.Context(), e.Model, "gitlab"); clr.Results[0].Error != nil || !jujuerrors.Is(err, jujuerrors.NotFound) {
		t.Errorf("clear dead = %+v; application: %v", clr, err)
	}
	if units, err := e.St.CAASUnits(t.Context(), e.Model, "gitlab"); err != nil || len(units) != 0 {
		t.Errorf("units after clearing = %v, %v", units, err)
	}
	if _, err := e.St.K8sSpec(t.Context(), e.Model, "gitlab"); !jujuerrors.Is(err, jujuerrors.NotFound) {
		t.Errorf("pod spec after clearing: %v", err)
	}
	e.MustCall("ClearApplicationsResources", testkit.Ents("application-gitlab"), &clr)
	if errCode(clr.Results[0].Error) != `application "gitlab" not found (not found)` {
		t.Errorf("clear removed = %+v", clr)
	}
}

func TestCAASProvisioningInfo(t *testing.T) {
	e := newCAAS(t, map[string]any{"resource-tags": "owner=ops"})
	// A reserved tag (refused when set since config is checked; an older
	// store may hold one) loses to the controller's own.
	model, err := e.St.Model(t.Context(), e.Model)
	if err != nil {
		t.Fatal(err)
	}
	model.Config["resource-tags"] = "owner=ops juju-model-uuid=spoof"
	testkit.WriteModelConfigs(t, e.D, map[string]map[string]any{e.Model: model.Config}, "")
	if err := e.St.UpdateControllerConfig(t.Context(), map[string]any{"caas-image-repo": `{"repository":"reg.example/juju","username":"u","password":"p","serveraddress":"reg.example"}`}, nil); err != nil {
		t.Fatal(err)
	}
	mgr, err := e.St.StorageManager(t.Context(), e.Model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Create("fast", storage.ProviderKubernetes, map[string]any{"storage-class": "ssd"}); err != nil {
		t.Fatal(err)
	}
	meta := testkit.GitlabMeta + "  logs:\n    type: filesystem\n    multiple:\n      range: 0-2\n"
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
	if err := e.St.SetModelConstraints(t.Context(), e.Model, state.Constraints{Mem: &mem, Arch: &arch}); err != nil {
		t.Fatal(err)
	}
	cores := uint64(4)
	_, err = e.St.AddCAASApplication(t.Context(), e.Model, state.CAASApplicationParams{Name: "gitlab",
		Charm: state.Charm{URL: "ch:gitlab-1", Meta: m}, CharmModifiedVersion: 3, Scale: 1,
		Constraints: state.Constraints{Cores: &cores, Arch: testkit.Ptr("amd64")},
		Storage:     map[string]storage.Constraints{"data": {Pool: "fast", Size: 10240}, "logs": {Count: 2, Size: 100}},
		Devices: map[string]state.DeviceConstraints{"gpu": {Type: "nvidia.com/gpu", Count: 2, Attributes: map[string]string{"gpu": "tesla"}},
			"fpga": {Type: "xilinx/fpga", Count: 1}},
		PodSpec: "spec"})
	if err != nil {
		t.Fatal(err)
	}
	e.Deploy("nospec", "name: nospec\n", 1, nil)
	e.St.AddCAASApplication(t.Context(), e.Model, state.CAASApplicationParams{Name: "both", Charm: state.Charm{URL: "ch:x", Meta: &charm.Meta{Name: "x"}}, PodSpec: "a", RawSpec: "b"})
	if err := e.St.SetRawK8sSpec(t.Context(), e.Model, "nospec", ""); err != nil {
		t.Fatal(err)
	}
	var res params.KubernetesProvisioningInfoResults
	e.MustCall("ProvisioningInfo", testkit.Ents("application-gitlab", "application-both", "application-nope", "unit-gitlab-0"), &res)
	ctrl, _ := e.St.Controller(t.Context())
	tags := map[string]string{"owner": "ops", "juju-model-uuid": e.Model, "juju-controller-uuid": ctrl.UUID}
	fsTags := map[string]string{"owner": "ops", "juju-model-uuid": e.Model, "juju-controller-uuid": ctrl.UUID, "juju-storage-owner": "gitlab"}
	want := &params.KubernetesProvisioningInfo{
		DeploymentInfo: &params.KubernetesDeploymentInfo{DeploymentType: "stateful", ServiceType: "loadbalancer"},
		PodSpec:        "spec",
		Constraints:    params.Value{Arch: testkit.Ptr("amd64"), CpuCores: &cores, Mem: &mem},
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
	if err := e.St.UpdateModelConfig(t.Context(), e.Model, nil, []string{"workload-storage"}); err != nil {
		t.Fatal(err)
	}
	e.MustCall("ProvisioningInfo", testkit.Ents("application-gitlab"), &res)
	if got := errCode(res.Results[0].Error); got != `getting filesystem "logs" parameters: storage pool for "logs" must be specified since there's no model default storage class ()` {
		t.Errorf("no storage class = %s", got)
	}
	if err := e.St.UpdateModelConfig(t.Context(), e.Model, map[string]any{"workload-storage": "standard"}, []string{"agent-version"}); err != nil {
		t.Fatal(err)
	}
	e.MustCall("ProvisioningInfo", testkit.Ents("application-gitlab"), &res)
	if got := errCode(res.Results[0].Error); got != `agent version is missing in model config "k8s" (not valid)` {
		t.Errorf("no agent version = %s", got)
	}
	if err := e.St.UpdateModelConfig(t.Context(), e.Model, map[string]any{"agent-version": "3.3.1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.St.UpdateControllerConfig(t.Context(), map[string]any{"caas-image-repo": "plain.example/ops"}, nil); err != nil {
		t.Fatal(err)
	}
	e.MustCall("ProvisioningInfo", testkit.Ents("application-gitlab"), &res)
	if r := res.Results[0]; r.Error != nil || r.Result.ImageRepo != (params.DockerImageInfo{RegistryPath: "plain.example/ops/jujud-operator:3.3.1", Repository: "plain.example/ops"}) {
		t.Errorf("plain repo = %+v %v", r.Result, r.Error)
	}
	// A pool name that is a provider type resolves to the provider.
	if cfg, err := mgr.Get("tmpfs"); err != nil || cfg.Provider != storage.ProviderTmpfs {
		t.Errorf("Get(tmpfs) = %+v, %v", cfg, err)
	}
}

func ui(pid, tag string) params.ApplicationUnitInfo {
	return params.ApplicationUnitInfo{ProviderId: pid, UnitTag: tag}
}

func TestCAASWatchers(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", "name: gitlab\n", 1, nil)
	var apps params.StringsWatchResult
	e.MustCall("WatchApplications", nil, &apps)
	if !reflect.DeepEqual(apps.Changes, []string{"gitlab"}) {
		t.Fatalf("initial = %v", apps.Changes)
	}
	watch := func(method string) *client.NotifyWatcher {
		var res params.NotifyWatchResults
		e.MustCall(method, testkit.Ents("application-gitlab", "application-nope", "unit-gitlab-0"), &res)
		if res.Results[0].Error != nil || res.Results[0].NotifyWatcherId == "" {
			t.Fatalf("%s = %+v", method, res)
		}
		return client.NewNotifyWatcher(e.C, res.Results[0].NotifyWatcherId)
	}
	entity, scale, spec := watch("Watch"), watch("WatchApplicationsScale"), watch("WatchPodSpec")
	var res params.NotifyWatchResults
	e.MustCall("Watch", testkit.Ents("application-nope", "unit-gitlab-0"), &res)
	if errCode(res.Results[0].Error) != `application "nope" not found (not found)` || errCode(res.Results[1].Error) != "permission denied (unauthorized access)" {
		t.Errorf("Watch errors = %+v", res)
	}
	e.MustCall("WatchPodSpec", testkit.Ents("application-nope", "unit-gitlab-0"), &res)
	if res.Results[0].Error != nil || errCode(res.Results[1].Error) != `"unit-gitlab-0" is not a valid application tag ()` {
		t.Errorf("WatchPodSpec errors = %+v", res)
	}
	var hashes params.StringsWatchResults
	e.MustCall("WatchApplicationsTrustHash", testkit.Ents("application-gitlab"), &hashes)
	if hashes.Results[0].Error != nil || hashes.Results[0].Changes != nil {
		t.Fatalf("WatchApplicationsTrustHash = %+v", hashes)
	}
	hash := client.NewStringsWatcher(e.C, hashes.Results[0].StringsWatcherId)
	appsW := client.NewStringsWatcher(e.C, apps.StringsWatcherId)
	const quiet = 100 * time.Millisecond

	// The pod spec fires the spec watcher only.
	if err := e.St.SetPodSpec(t.Context(), e.Model, "gitlab", "new spec"); err != nil {
		t.Fatal(err)
	}
	if !testkit.NextWithin(t, spec, 5*time.Second) {
		t.Error("spec watcher did not fire")
	}
	// Trust fires the hash watcher only, with the new hash.
	if err := e.St.SetApplicationTrust(t.Context(), e.Model, "gitlab", true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 5*time.Second)
	got, err := hash.Next(ctx)
	cancel()
	want, _ := e.St.ApplicationConfigHash(t.Context(), e.Model, "gitlab")
	if err != nil || !reflect.DeepEqual(got, []string{want}) {
		t.Errorf("hash Next = %v, %v; want [%s]", got, err, want)
	}
	// Setting the same trust again changes no hash.
	if err := e.St.SetApplicationTrust(t.Context(), e.Model, "gitlab", true); err != nil {
		t.Fatal(err)
	}
	// Scale fires the entity and scale watchers.
	if err := e.St.SetApplicationScale(t.Context(), e.Model, "gitlab", 3); err != nil {
		t.Fatal(err)
	}
	if !testkit.NextWithin(t, scale, 5*time.Second) || !testkit.NextWithin(t, entity, 5*time.Second) {
		t.Error("scale/entity watcher did not fire on scale")
	}
	// Constraints fire the entity watcher but not the scale watcher.
	if err := e.St.SetApplicationConstraints(t.Context(), e.Model, "gitlab", state.Constraints{Mem: testkit.Ptr(uint64(1))}); err != nil {
		t.Fatal(err)
	}
	if !testkit.NextWithin(t, entity, 5*time.Second) {
		t.Error("entity watcher did not fire on constraints")
	}
	// Unit updates fire none of them; a new application fires the
	// lifecycle watcher.
	e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-gitlab", Units: []params.ApplicationUnitParams{{ProviderId: "x", Status: "running"}}})
	e.Deploy("other", "name: other\n", 1, nil)
	ctx, cancel = context.WithTimeout(testkit.Ctx(t), 5*time.Second)
	got, err = appsW.Next(ctx)
	cancel()
	if err != nil || !reflect.DeepEqual(got, []string{"other"}) {
		t.Errorf("applications Next = %v, %v", got, err)
	}
	if _, err := e.St.DestroyApplication(t.Context(), e.Model, "gitlab", false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(testkit.Ctx(t), 5*time.Second)
	got, err = appsW.Next(ctx)
	cancel()
	if err != nil || !reflect.DeepEqual(got, []string{"gitlab"}) {
		t.Errorf("applications Next after destroy = %v, %v", got, err)
	}
	if !testkit.NextWithin(t, entity, 5*time.Second) {
		t.Error("entity watcher did not fire on life")
	}
	for name, w := range map[string]*client.NotifyWatcher{"scale": scale, "spec": spec} {
		if testkit.NextWithin(t, w, quiet) {
			t.Errorf("%s watcher fired on what it does not watch", name)
		}
	}
	ctx, cancel = context.WithTimeout(testkit.Ctx(t), quiet)
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
