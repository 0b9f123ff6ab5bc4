package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// dial connects to addr and logs in: as the admin user on the default
// model (agent false), or as the controller agent on model.
func dial(ctx context.Context, creds *credentials.Credentials, addr string, agent bool, model string) (*client.Conn, error) {
	if !agent {
		model = creds.DefaultModelUUID
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addr: addr, ModelUUID: model, CACert: []byte(creds.CACert), DialTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	if agent {
		_, err = c.LoginControllerAgent(ctx, creds)
	} else {
		_, err = c.LoginAdmin(ctx, creds)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func mustDial(t *testing.T, creds *credentials.Credentials, addr string, agent bool, model string) *client.Conn {
	t.Helper()
	c, err := dial(t.Context(), creds, addr, agent, model)
	if err != nil {
		t.Fatalf("log in at %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// hostPorts flattens LoginResult.servers / APIHostPorts into host:port.
func hostPorts(servers [][]params.HostPort) []string {
	var out []string
	for _, hps := range servers {
		for _, hp := range hps {
			out = append(out, net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port)))
		}
	}
	return out
}

func sorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}

func addrsOf(ds ...*daemonProc) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.addr)
	}
	return sorted(out)
}

// seen accumulates the ids a strings watch delivers.
type seen struct {
	mu  sync.Mutex
	ids map[string]bool
}

// follow reads w until it ends, recording every id.
func (s *seen) follow(w *client.StringsWatch) {
	for ids := range w.Changes() {
		s.mu.Lock()
		if s.ids == nil {
			s.ids = map[string]bool{}
		}
		for _, id := range ids {
			s.ids[id] = true
		}
		s.mu.Unlock()
	}
}

// missing returns the ids of want not seen yet.
func (s *seen) missing(want []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range want {
		if !s.ids[id] {
			out = append(out, id)
		}
	}
	return out
}

// register is one value the workload writes, by one writer, one call at
// a time: a machine's status message, or a model config key.
type register struct {
	name string // machine id or config key
	// truth is the last value acknowledged (or read back); maybe are the
	// values written since whose outcome is unknown: the call failed
	// (an error answer such as try again may come after etcd committed)
	// or had no answer when the daemon died. After a failure, the
	// register holds truth or one of maybe, nothing else.
	truth string
	maybe []string
}

func (r *register) candidates() []string { return append([]string{r.truth}, r.maybe...) }

// settle records what was read back as the register's value.
func (r *register) settle(v string) { r.truth, r.maybe = v, nil }

// writer writes its registers, one call at a time, round robin.
type writer struct {
	name  string
	regs  []*register
	write func(ctx context.Context, c *client.Conn, r *register, v string) error

	seq   int
	acked atomic.Int64
	mu    sync.Mutex
	acks  []time.Time       // when each write was acknowledged
	codes map[string]int    // error answers by code
	first map[string]string // an example error per code
}

// run writes until ctx ends (nil) or the connection fails (its error).
// Error answers are recorded and writing goes on after 10ms.
func (w *writer) run(ctx context.Context, c *client.Conn) error {
	for i := 0; ctx.Err() == nil; i++ {
		r := w.regs[i%len(w.regs)]
		w.seq++
		v := w.name + "-" + strconv.Itoa(w.seq)
		r.maybe = append(r.maybe, v)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := w.write(cctx, c, r, v)
		cancel()
		var perr *params.Error
		switch {
		case err == nil:
			r.settle(v)
			w.acked.Add(1)
			w.mu.Lock()
			w.acks = append(w.acks, time.Now())
			w.mu.Unlock()
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &perr):
			w.mu.Lock()
			if w.codes == nil {
				w.codes, w.first = map[string]int{}, map[string]string{}
			}
			w.codes[perr.Code]++
			if _, ok := w.first[perr.Code]; !ok {
				w.first[perr.Code] = perr.Error()
			}
			w.mu.Unlock()
			// As an agent would, not at once again (etcd down
			// answers in a millisecond).
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		default:
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	return nil
}

// acksSince returns the acknowledgement times after t0.
func (w *writer) acksSince(t0 time.Time) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, _ := slices.BinarySearchFunc(w.acks, t0, func(a, b time.Time) int { return a.Compare(b) })
	return slices.Clone(w.acks[i:])
}

// longestGap returns the longest time between two consecutive
// acknowledgements, from the last one before t0 to the n-th after it:
// how long the writer could not write around t0.
func (w *writer) longestGap(t0 time.Time, n int) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, _ := slices.BinarySearchFunc(w.acks, t0, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for k := max(i, 1); k < min(i+n, len(w.acks)); k++ {
		gap = max(gap, w.acks[k].Sub(w.acks[k-1]))
	}
	return gap
}

// errorCodes describes the error answers the writer got.
func (w *writer) errorCodes() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.codes) == 0 {
		return "none"
	}
	return fmt.Sprintf("%v (e.g. %v)", w.codes, w.first)
}

// statusWriter sets the status message of its machines through the
// Provisioner (as the controller agent).
func statusWriter(name string, machines []string) *writer {
	w := &writer{name: name}
	for _, id := range machines {
		w.regs = append(w.regs, &register{name: id})
	}
	w.write = func(ctx context.Context, c *client.Conn, r *register, v string) error {
		res, err := client.NewProvisioner(c).SetStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: "machine-" + r.name, Status: "started", Info: v}}})
		return oneResult(res, err)
	}
	return w
}

// configWriter sets keys of the default model's config (as the admin).
func configWriter(name string, keys int) *writer {
	w := &writer{name: name}
	for i := range keys {
		w.regs = append(w.regs, &register{name: "e2e-" + name + "-" + strconv.Itoa(i)})
	}
	w.write = func(ctx context.Context, c *client.Conn, r *register, v string) error {
		_, err := client.NewModelAdmin(c).SetModelConfig(ctx, params.SetModelConfigArgs{Model: "default", Config: map[string]any{r.name: v}})
		return err
	}
	return w
}

func oneResult(res params.ErrorResults, err error) error {
	if err != nil {
		return err
	}
	if len(res.Results) != 1 {
		return fmt.Errorf("%d results for 1 entity", len(res.Results))
	}
	if e := res.Results[0].Error; e != nil {
		return e
	}
	return nil
}

// barrier writes through d and returns once d acknowledged it: d's
// replica has then applied every write etcd committed before, through
// any daemon (a daemon reads its own writes, and its replica applies the
// revisions in order), so what the checks read through d is final.
func barrier(t *testing.T, creds *credentials.Credentials, d *daemonProc) {
	t.Helper()
	c := mustDial(t, creds, d.addr, false, "")
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if _, err := client.NewModelAdmin(c).SetModelConfig(ctx, params.SetModelConfigArgs{Model: "default",
		Config: map[string]any{"e2e-barrier": time.Now().String()}}); err != nil {
		t.Fatalf("barrier write through %s: %v", d.name, err)
	}
}

// checkStatuses reads through d, as the controller agent and after a
// barrier, the status of every status register's machine and checks it
// holds its acknowledged value or one in doubt; then settles it to what
// was read.
func checkStatuses(t *testing.T, creds *credentials.Credentials, d *daemonProc, ws ...*writer) {
	t.Helper()
	barrier(t, creds, d)
	c := mustDial(t, creds, d.addr, true, creds.DefaultModelUUID)
	var regs []*register
	var args params.Entities
	for _, w := range ws {
		for _, r := range w.regs {
			regs = append(regs, r)
			args.Entities = append(args.Entities, params.Entity{Tag: "machine-" + r.name})
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := client.NewProvisioner(c).Status(ctx, args)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != len(regs) {
		t.Fatalf("Status: %d results for %d machines", len(res.Results), len(regs))
	}
	for i, r := range regs {
		got := res.Results[i]
		if got.Error != nil {
			t.Fatalf("Status of machine %s: %v", r.name, got.Error)
		}
		if !slices.Contains(r.candidates(), got.Info) {
			t.Errorf("machine %s: status message %q; acknowledged %q (in doubt: %q)", r.name, got.Info, r.truth, r.maybe)
		}
		r.settle(got.Info)
	}
}

// checkConfig is checkStatuses for config registers, as the admin.
func checkConfig(t *testing.T, creds *credentials.Credentials, d *daemonProc, ws ...*writer) {
	t.Helper()
	barrier(t, creds, d)
	c := mustDial(t, creds, d.addr, false, "")
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cfg, err := client.NewModelAdmin(c).ModelConfig(ctx, params.ModelArgs{Model: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		for _, r := range w.regs {
			got := ""
			if v, ok := cfg.Config[r.name]; ok {
				got = fmt.Sprint(v)
			}
			if !slices.Contains(r.candidates(), got) {
				t.Errorf("model config %s: %q; acknowledged %q (in doubt: %q)", r.name, got, r.truth, r.maybe)
			}
			r.settle(got)
		}
	}
}

// addMachines adds n machines to the default model through c (admin).
func addMachines(t *testing.T, c *client.Conn, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := client.NewModelAdmin(c).AddMachines(ctx, params.AddMachinesArgs{Count: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Machines) != n {
		t.Fatalf("AddMachines(%d) added %v", n, res.Machines)
	}
	return res.Machines
}

// median of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
