package crashtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// regKind is what a register tracks.
type regKind int

const (
	regModel          regKind = iota // a model slot: "present" or "" (ModelAdmin AddModel/RemoveModel)
	regConfig                        // a key of the default model's config: its value or "" (SetModelConfig)
	regStatus                        // a machine's agent status: "status|message" (Provisioner SetStatus)
	regInstanceStatus                // a machine's instance status (SetInstanceStatus)
	regPassword                      // a machine agent's valid password (SetPasswords)
	regLife                          // a machine's life: unprovisioned, provisioned, dead, removed (SetInstanceInfo, EnsureDead, Remove)
	regUnits                         // a CAAS application's scale, operator status and units (CAASUnitProvisioner UpdateApplicationsUnits)
)

// Values of a regLife register.
const (
	lifeUnprovisioned = "unprovisioned"
	lifeProvisioned   = "provisioned"
	lifeDead          = "dead"
	lifeRemoved       = "removed"
)

// register is one value the workload writes. It is written by one writer
// goroutine, one call at a time, and read by the harness only while no
// writer runs.
type register struct {
	kind regKind
	name string // model name, config key or machine id
	// truth is the value known to be durable: last acknowledged, or last
	// observed on disk after a kill.
	truth string
	// pending is the value of the write whose answer has not arrived, if any.
	pending *string
}

func (r *register) String() string {
	switch r.kind {
	case regModel:
		return "model " + r.name
	case regConfig:
		return "model config key " + r.name
	case regStatus:
		return "status of machine " + r.name
	case regInstanceStatus:
		return "instance status of machine " + r.name
	case regPassword:
		return "agent password of machine " + r.name
	case regUnits:
		return "units of caas application " + r.name
	default:
		return "life of machine " + r.name
	}
}

func machineTag(id string) string { return "machine-" + id }

// instanceID and nonce are what SetInstanceInfo records for a life
// machine, and the provisioned status machines get at setup.
func instanceID(id string) string { return "crash-inst-" + id }
func nonceOf(id string) string    { return "crash-nonce-" + id }

// writer is one API connection writing its own registers.
type writer struct {
	name  string
	admin bool // the admin user on the default model; else the controller agent
	// model is the model the controller agent logs in to ("": the
	// controller model).
	model string
	regs  []*register

	// The machine adder (ModelAdmin.AddMachines on the controller model)
	// has no registers of its own: each acknowledged machine becomes a
	// regLife register, recorded in added and handed, through the
	// harness's fresh channel, to an agent writer that takes it through
	// its life. held are those not handed over yet; addPending is the
	// number of machines the call in flight asked for (0: none).
	adder      bool
	added      []*register
	held       []*register
	addPending int
}

// writerEnd is how a writer's run ended.
type writerEnd struct {
	acked    int
	refusals []string
	// err is the error that ended it (dial, login or a broken connection)
	// and at is when it happened: after the kill that is expected.
	err error
	at  time.Time
}

// run writes until ctx ends or the connection breaks. It calls loggedIn
// once its login has succeeded or failed.
func (w *writer) run(ctx context.Context, h *harness, addr string, rng *rand.Rand, loggedIn func()) (end writerEnd) {
	fail := func(err error) writerEnd {
		end.err, end.at = fmt.Errorf("%s: %w", w.name, err), time.Now()
		return end
	}
	conn, err := h.dial(ctx, addr, w.admin, w.model)
	loggedIn()
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	if w.adder {
		return w.runAdder(ctx, h, conn, rng)
	}
	for ctx.Err() == nil {
		w.takeFresh(h)
		r := w.regs[rng.IntN(len(w.regs))]
		if r.kind == regLife && r.truth == lifeRemoved {
			continue // done with; dropped from the workload at the next check
		}
		v, call := w.next(h, r, rng)
		r.pending = &v
		err := call(ctx, conn)
		var perr *params.Error
		switch {
		case err == nil:
			r.truth, r.pending = v, nil
			end.acked++
		case errors.As(err, &perr):
			// The daemon answered, but refused: a write the model of the
			// harness says is valid. Reported at the end of the run.
			end.refusals = append(end.refusals, fmt.Sprintf("%s: %s to %q: %v", w.name, r, v, err))
		default:
			return fail(err)
		}
	}
	return end
}

// takeFresh gives an agent writer a machine the adder added when it has
// fewer than two machines to take through their life.
func (w *writer) takeFresh(h *harness) {
	if w.admin || w.model != "" {
		return
	}
	live := 0
	for _, r := range w.regs {
		if r.kind == regLife && r.truth != lifeRemoved {
			live++
		}
	}
	if live >= 2 {
		return
	}
	select {
	case r := <-h.fresh:
		w.regs = append(w.regs, r)
	default:
	}
}

// runAdder adds machines to the controller model, one or two a call,
// and hands them to the agent writers. It waits while the harness's fresh
// channel is full, so the machines waiting for an agent stay few.
func (w *writer) runAdder(ctx context.Context, h *harness, conn *client.Conn, rng *rand.Rand) (end writerEnd) {
	for ctx.Err() == nil {
		if len(w.held) > 0 {
			select {
			case h.fresh <- w.held[0]:
				w.held = w.held[1:]
			case <-ctx.Done():
			}
			continue
		}
		n := 1 + rng.IntN(2)
		w.addPending = n
		var res params.AddMachinesResult
		err := conn.Call(ctx, "ModelAdmin", 1, "", "AddMachines",
			params.AddMachinesArgs{Model: state.ControllerModelName, Base: "ubuntu@22.04", Count: n}, &res)
		var perr *params.Error
		switch {
		case err == nil && len(res.Machines) == n:
			w.addPending = 0
			end.acked++
			for _, id := range res.Machines {
				r := &register{kind: regLife, name: id, truth: lifeUnprovisioned}
				w.added = append(w.added, r)
				w.held = append(w.held, r)
			}
		case err == nil:
			// Some machines may be there that we cannot name: a refusal.
			end.refusals = append(end.refusals, fmt.Sprintf("%s: AddMachines count %d: added %v", w.name, n, res.Machines))
			return end
		case errors.As(err, &perr):
			w.addPending = 0
			end.refusals = append(end.refusals, fmt.Sprintf("%s: AddMachines count %d: %v", w.name, n, err))
		default:
			end.err, end.at = fmt.Errorf("%s: %w", w.name, err), time.Now()
			return end
		}
	}
	return end
}

// next returns the value a write to r sets and the call that writes it.
func (w *writer) next(h *harness, r *register, rng *rand.Rand) (string, func(context.Context, *client.Conn) error) {
	seq := h.seq.Add(1)
	tag := machineTag(r.name)
	switch r.kind {
	case regUnits:
		return nextUnits(r, seq, rng)
	case regModel:
		if r.truth == "" {
			return "present", func(ctx context.Context, c *client.Conn) error {
				var res params.ModelSummary
				return c.Call(ctx, "ModelAdmin", 1, "", "AddModel", params.AddModelArgs{Name: r.name}, &res)
			}
		}
		return "", func(ctx context.Context, c *client.Conn) error {
			var res params.RemoveModelResult
			if err := c.Call(ctx, "ModelAdmin", 1, "", "RemoveModel", params.RemoveModelArgs{Model: r.name}, &res); err != nil {
				return err
			}
			if !res.Removed {
				return &params.Error{Message: "empty model not removed at once"}
			}
			return nil
		}
	case regConfig:
		v := "v" + strconv.FormatUint(seq, 10)
		return v, func(ctx context.Context, c *client.Conn) error {
			var res params.ModelConfigInfo
			return c.Call(ctx, "ModelAdmin", 1, "", "SetModelConfig",
				params.SetModelConfigArgs{Model: "default", Config: map[string]any{r.name: v}}, &res)
		}
	case regStatus, regInstanceStatus:
		status, method := "started", "SetStatus"
		if r.kind == regInstanceStatus {
			status, method = "running", "SetInstanceStatus"
		}
		info := "crash-" + strconv.FormatUint(seq, 10)
		return status + "|" + info, func(ctx context.Context, c *client.Conn) error {
			return bulk(ctx, c, method, params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: tag, Status: status, Info: info}}})
		}
	case regPassword:
		pw := "crash-agent-password-" + strconv.FormatUint(seq, 10)
		return pw, func(ctx context.Context, c *client.Conn) error {
			return bulk(ctx, c, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{{Tag: tag, Password: pw}}})
		}
	}
	// regLife: one step along unprovisioned → provisioned → dead → removed.
	entities := params.Entities{Entities: []params.Entity{{Tag: tag}}}
	switch r.truth {
	case lifeUnprovisioned:
		return lifeProvisioned, func(ctx context.Context, c *client.Conn) error {
			return bulk(ctx, c, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{{
				Tag: tag, InstanceId: instanceID(r.name), Nonce: nonceOf(r.name), DisplayName: "crash " + r.name,
			}}})
		}
	case lifeProvisioned:
		return lifeDead, func(ctx context.Context, c *client.Conn) error { return bulk(ctx, c, "EnsureDead", entities) }
	default:
		return lifeRemoved, func(ctx context.Context, c *client.Conn) error { return bulk(ctx, c, "Remove", entities) }
	}
}

// A regUnits value is what the state holds of a CAAS application, as
// unitsValue writes it: its scale, operator status and, by provider id,
// every unit's pod: "scale 2; operator active/crash-7; pod crash-p3
// 10.0.0.3 running/crash-7; pod crash-p5 10.0.0.5 waiting/crash-7". A
// unit that has no pod or is not alive shows as "unit NAME LIFE".
func unitsValue(scale int, operator state.Status, pods, others []string) string {
	slices.Sort(pods)
	slices.Sort(others)
	parts := append([]string{fmt.Sprintf("scale %d", scale), "operator " + operator.Status + "/" + operator.Message}, pods...)
	return strings.Join(append(parts, others...), "; ")
}

func podValue(id, addr, status, info string) string {
	return "pod " + id + " " + addr + " " + status + "/" + info
}

// containerStatus is the cloud container status a reported pod status
// becomes (specs/caasunitprovisioner.md §4.4).
var containerStatus = map[string]string{"allocating": "waiting", "running": "running", "blocked": "blocked"}

// nextUnits is the next report of the pods of r's application: each pod
// of the state now stays with probability 3/4 (with a new address and
// status), new pods (fresh provider ids) make up 1 to 4 pods, the scale
// is their number. Non-stateful pods with a scale: units whose pod is
// not reported are removed at once, new pods get new units.
func nextUnits(r *register, seq uint64, rng *rand.Rand) (string, func(context.Context, *client.Conn) error) {
	var ids []string
	for part := range strings.SplitSeq(r.truth, "; ") {
		if f := strings.Fields(part); len(f) > 1 && f[0] == "pod" && rng.IntN(4) > 0 {
			ids = append(ids, f[1])
		}
	}
	for n := 1 + rng.IntN(4); len(ids) < n; {
		ids = append(ids, fmt.Sprintf("crash-p%d-%d", seq, len(ids)))
	}
	info := "crash-" + strconv.FormatUint(seq, 10)
	statuses := slices.Sorted(maps.Keys(containerStatus))
	arg := params.UpdateApplicationUnits{ApplicationTag: "application-" + r.name, Scale: new(len(ids)),
		Status: params.EntityStatus{Status: "active", Info: info}, Units: []params.ApplicationUnitParams{}}
	var pods []string
	for i, id := range ids {
		addr := fmt.Sprintf("10.%d.%d.%d", i, seq>>8&255, seq&255)
		status := statuses[rng.IntN(len(statuses))]
		arg.Units = append(arg.Units, params.ApplicationUnitParams{ProviderId: id, Address: addr, Ports: []string{"80/tcp"}, Status: status, Info: info})
		pods = append(pods, podValue(id, addr, containerStatus[status], info))
	}
	v := unitsValue(len(ids), state.Status{Status: "active", Message: info}, pods, nil)
	return v, func(ctx context.Context, c *client.Conn) error {
		var res params.UpdateApplicationUnitResults
		if err := c.Call(ctx, "CAASUnitProvisioner", 2, "", "UpdateApplicationsUnits",
			params.UpdateApplicationUnitArgs{Args: []params.UpdateApplicationUnits{arg}}, &res); err != nil {
			return err
		}
		if len(res.Results) != 1 {
			return &params.Error{Message: fmt.Sprintf("UpdateApplicationsUnits: %d results for 1 application", len(res.Results))}
		}
		if e := res.Results[0].Error; e != nil {
			return e
		}
		if in := res.Results[0].Info; in == nil || len(in.Units) != len(ids) {
			return &params.Error{Message: fmt.Sprintf("UpdateApplicationsUnits: unit info %+v for %d pods", in, len(ids))}
		}
		return nil
	}
}

// bulk calls a Provisioner v11 method with one entity and returns its
// error, if any.
func bulk(ctx context.Context, c *client.Conn, method string, args any) error {
	var res params.ErrorResults
	if err := c.Call(ctx, "Provisioner", 11, "", method, args, &res); err != nil {
		return err
	}
	if len(res.Results) != 1 {
		return &params.Error{Message: fmt.Sprintf("%s: %d results for 1 entity", method, len(res.Results))}
	}
	if e := res.Results[0].Error; e != nil {
		return e
	}
	return nil
}

// scraper polls /metrics for provisiond_state_revision: the revision a
// client can see. Every value it sees must be on disk after the kill.
type scraper struct {
	min, max atomic.Uint64 // min is 0 until the first sample
}

func (s *scraper) run(ctx context.Context, addr string, caCert []byte) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caCert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if rev, ok := scrapeRevision(ctx, hc, addr); ok {
			if s.min.Load() == 0 || rev < s.min.Load() {
				s.min.Store(rev)
			}
			if rev > s.max.Load() {
				s.max.Store(rev)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func scrapeRevision(ctx context.Context, hc *http.Client, addr string) (uint64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "provisiond_state_revision "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil && f > 0 {
				return uint64(f), true
			}
		}
	}
	return 0, false
}
