package robustness

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The CAAS share of the workload, in the CAAS model (caasModel):
//
//   - a unit writer, the application's operator as the cluster reports
//     it (the controller agent, CAASUnitProvisioner
//     UpdateApplicationsUnits of application podsApp): each report lists
//     the pods it keeps, each with a status message of its own, adds a
//     pod (the daemon makes a unit of it) or leaves one out with the
//     scale lowered to match (the daemon removes its unit). Registers
//     pod/ID#life (alive, removed) and pod/ID#status (the unit's
//     container status message), per provider id: a report in doubt
//     names no unit, so a pod is known by its provider id, and its unit
//     (the entity a model watcher names) is filled in from the reports
//     that were answered (resolveEntities);
//   - a pod spec writer (the admin, ModelAdmin SetPodSpec of caasApp):
//     register application/web#podspec, entity podspec/web.
const (
	podsApp = "pods" // the unit writer's application, scale 0 at first
	maxPods = 3      // the most pods a report lists
)

func podLifeReg(id string) string   { return "pod/" + id + "#life" }
func podStatusReg(id string) string { return "pod/" + id + "#status" }
func podSpecReg(app string) string  { return "application/" + app + "#podspec" }
func podSpecEntity(app string) string {
	return "podspec/" + app
}

// entityNames maps registers' entities (the part of a register's name
// before "#": "pod/ID", "modelrec/NAME") to the entities the daemons made
// of them ("unit/pods/3", "model/UUID"), learnt from answers: a write in
// doubt names none, and a later answer may.
type entityNames struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *entityNames) set(key, entity string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	n.m[key] = entity
}

func (n *entityNames) get(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[key]
}

// notePods sets the units the pods of a report's answer became.
func (n *entityNames) notePods(info *params.UpdateApplicationUnitsInfo) {
	if info == nil {
		return
	}
	for _, u := range info.Units {
		if name, ok := strings.CutPrefix(u.UnitTag, "unit-"); ok {
			// unit-pods-3 -> pods/3 (a unit's number follows the last "-").
			i := strings.LastIndexByte(name, '-')
			n.set("pod/"+u.ProviderId, "unit/"+name[:i]+"/"+name[i+1:])
		}
	}
}

// resolveEntities names the entity of each write whose register's
// entity an answer named; the others keep theirs (none: their writes are
// checked for linearizability only).
func (w *workload) resolveEntities() {
	w.names.mu.Lock()
	defer w.names.mu.Unlock()
	ops := w.h.rec.ops
	for i := range ops {
		key, _, _ := strings.Cut(ops[i].Register, "#")
		if e, ok := w.names.m[key]; ok {
			ops[i].Entity = e
		}
	}
}

// findPod reads the unit of pod id through the admin (ModelAdmin
// Application of podsApp); found is false if there is none.
func findPod(ctx context.Context, c *client.Conn, id string) (u params.UnitStatus, found bool, err error) {
	st, err := client.NewModelAdmin(c).Application(ctx, params.ApplicationArgs{Model: caasModel, Application: podsApp})
	if err != nil {
		return u, false, err
	}
	for _, u := range st.Units {
		if u.ProviderID == id {
			return u, true, nil
		}
	}
	return u, false, nil
}

func readPodLife(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		u, found, err := findPod(ctx, c, id)
		if err == nil && !found {
			return readValue{v: "removed", absent: true}, nil
		}
		return readValue{v: u.Life}, err
	}
}

func readPodStatus(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		u, found, err := findPod(ctx, c, id)
		if err == nil && !found {
			return readValue{skip: true}, nil // not made yet, or gone with its unit
		}
		return readValue{v: u.ContainerStatus.Message}, err
	}
}

func readPodSpec(app string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		info, err := client.NewCAASUnitProvisioner(c).Application(app).ProvisioningInfo(ctx)
		if err != nil {
			return readValue{}, err
		}
		return readValue{v: specValue(info.PodSpec)}, nil
	}
}

// podSpec is the spec written for value v; specValue finds v in a spec
// read back ("" for none).
func podSpec(v string) string {
	return "containers:\n- name: web\n  image: web:" + v + "\n"
}

func specValue(spec string) string {
	_, v, ok := strings.Cut(spec, "image: web:")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, "\n")
	return v
}

// unitWriter reports pods of podsApp until ctx ends: each report adds a
// pod (while fewer than maxPods), leaves one out (the scale lowered with
// it: its unit is removed), or only changes every pod's status message.
// A report that was never sent is made again as it was.
func (w *workload) unitWriter(ctx context.Context, s *session) {
	defer s.close()
	var live []string // provider ids of the pods reported
	next := 0
	for seq := 0; ctx.Err() == nil; seq++ {
		pods := live
		var added, removed string
		switch r := s.rng.IntN(4); {
		case len(live) == 0 || (len(live) < maxPods && r == 0):
			added = fmt.Sprintf("p%d", next)
			pods = append(append([]string(nil), live...), added)
		case r == 1:
			removed = live[s.rng.IntN(len(live))]
			pods = nil
			for _, id := range live {
				if id != removed {
					pods = append(pods, id)
				}
			}
		}
		var calls []*call
		var units []params.ApplicationUnitParams
		for _, id := range pods {
			v := fmt.Sprintf("u%d-%d", s.id, seq)
			units = append(units, params.ApplicationUnitParams{ProviderId: id, Address: "10.1.0.1", Status: "running", Info: v})
			calls = append(calls, w.h.rec.begin(s.id, podStatusReg(id), "", true, v))
		}
		if added != "" {
			calls = append(calls, w.h.rec.begin(s.id, podLifeReg(added), "", true, "alive"))
		}
		if removed != "" {
			// The report's transaction writes the unit's statuses (its
			// container terminated) before it removes it: two changes of
			// the unit, which a watcher may deliver in two values, as it
			// may an added pod's (the unit created, then its status).
			calls = append(calls, w.h.rec.begin(s.id, podStatusReg(removed), "", true, "stopped"),
				w.h.rec.begin(s.id, podLifeReg(removed), "", true, "removed"))
		}
		scale := len(pods)
		var info *params.UpdateApplicationUnitsInfo
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			var err error
			info, err = client.NewCAASUnitProvisioner(c).Application(podsApp).UpdateUnits(ctx,
				params.UpdateApplicationUnits{Scale: &scale, Units: units})
			return err
		})
		if s.skip(ctx, err) {
			continue // never sent: nothing changed
		}
		if added != "" {
			w.addReg(reg{name: podLifeReg(added), model: caasModel, read: readPodLife(added)})
			w.addReg(reg{name: podStatusReg(added), model: caasModel, read: readPodStatus(added)})
			next++
		}
		w.names.notePods(info)
		for _, c := range calls {
			c.op.Model = caasModel
			c.op.Call = calls[0].op.Call
			c.end(s.daemon, err, "")
		}
		live = pods
	}
}

// podSpecWriter sets caasApp's pod spec until ctx ends.
func (w *workload) podSpecWriter(ctx context.Context, s *session) {
	defer s.close()
	for seq := 0; ctx.Err() == nil; seq++ {
		v := fmt.Sprintf("ps%d-%d", s.id, seq)
		call := w.h.rec.begin(s.id, podSpecReg(caasApp), podSpecEntity(caasApp), true, v)
		call.op.Model = caasModel
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			_, err := client.NewModelAdmin(c).SetPodSpec(ctx, params.SetPodSpecArgs{Model: caasModel, Application: caasApp, Spec: podSpec(v)})
			return err
		})
		if s.skip(ctx, err) {
			continue
		}
		call.end(s.daemon, err, "")
	}
}
