package crashtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"provisiond/rpc/client"
	"provisiond/rpc/params"
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
	admin bool // the admin user on the default model; else the controller agent on the controller model
	regs  []*register
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

// run writes until ctx ends or the connection breaks.
func (w *writer) run(ctx context.Context, h *harness, addr string, rng *rand.Rand) (end writerEnd) {
	fail := func(err error) writerEnd {
		end.err, end.at = fmt.Errorf("%s: %w", w.name, err), time.Now()
		return end
	}
	conn, err := h.dial(ctx, addr, w.admin)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	for ctx.Err() == nil {
		r := w.regs[rng.IntN(len(w.regs))]
		if r.kind == regLife && r.truth == lifeRemoved {
			continue // done with; dropped from the workload at the next check
		}
		v, call := w.next(h, r)
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

// next returns the value a write to r sets and the call that writes it.
func (w *writer) next(h *harness, r *register) (string, func(context.Context, *client.Conn) error) {
	seq := h.seq.Add(1)
	tag := machineTag(r.name)
	switch r.kind {
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
