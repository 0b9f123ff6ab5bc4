package provisiondtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// AgentLogin is what a machine agent logs in with.
type AgentLogin struct {
	Model    string // the UUID of the machine's model
	Tag      string // "machine-1", "machine-1-lxd-0"
	Password string
	Nonce    string
}

type connKey struct {
	model, who string // who: "admin", "controller", or a machine id
}

type agentKey struct{ model, id string }

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), CallTimeout)
}

// Dial connects to model (a name or UUID; "" is the controller endpoint /api)
// without logging in. The connection is closed at t's cleanup.
func (s *Server) Dial(t testing.TB, model string) *client.Conn {
	t.Helper()
	c, err := s.dial(model)
	if err != nil {
		t.Fatalf("provisiondtest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *Server) dial(model string) (*client.Conn, error) {
	uuid, err := s.modelUUID(model)
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx()
	defer cancel()
	return client.DialCredentials(ctx, s.Credentials(), client.Config{ModelUUID: uuid})
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// modelUUID is the UUID of model, given by name ("default") or UUID, as
// provisionctl's -m takes it; "" stays "" (the controller endpoint).
func (s *Server) modelUUID(model string) (string, error) {
	if model == "" || uuidForm.MatchString(model) {
		return model, nil
	}
	ma, err := s.modelAdmin()
	if err != nil {
		return "", err
	}
	ctx, cancel := callCtx()
	defer cancel()
	info, err := ma.ModelConfig(ctx, params.ModelArgs{Model: model})
	if err != nil {
		return "", fmt.Errorf("model %q: %w", model, err)
	}
	return info.UUID, nil
}

// Admin returns a connection to model ("" for /api) logged in as the
// admin user (a controller superuser: ModelAdmin, and every model). It is
// closed at t's cleanup.
func (s *Server) Admin(t testing.TB, model string) *client.Conn {
	t.Helper()
	c := s.Dial(t, model)
	ctx, cancel := callCtx()
	defer cancel()
	if _, err := c.LoginAdmin(ctx, s.Credentials()); err != nil {
		t.Fatalf("provisiondtest: login as admin on %q: %v", model, err)
	}
	return c
}

// ControllerAgent returns a connection to model ("" for /api) logged in
// as the controller agent (machine-0 of the controller model: the machine
// Provisioner of every model's top-level machines and the
// CAASUnitProvisioner of CAAS models). It is closed at t's cleanup.
func (s *Server) ControllerAgent(t testing.TB, model string) *client.Conn {
	t.Helper()
	c := s.Dial(t, model)
	ctx, cancel := callCtx()
	defer cancel()
	if _, err := c.LoginControllerAgent(ctx, s.Credentials()); err != nil {
		t.Fatalf("provisiondtest: login as the controller agent on %q: %v", model, err)
	}
	return c
}

// MachineAgent returns a connection to model logged in as the agent of
// machine id ("0", "1/lxd/0"), made ready first as ProvisionMachine does.
// It is closed at t's cleanup.
func (s *Server) MachineAgent(t testing.TB, model, id string) *client.Conn {
	t.Helper()
	login := s.ProvisionMachine(t, model, id)
	c := s.Dial(t, model)
	ctx, cancel := callCtx()
	defer cancel()
	if _, err := c.LoginAgent(ctx, login.Tag, login.Password, login.Nonce); err != nil {
		t.Fatalf("provisiondtest: login as %s: %v", login.Tag, err)
	}
	return c
}

// ProvisionMachine makes machine id of model (a name or UUID) ready for its agent
// to log in, as Juju's provisioner does, and returns the agent's login:
//   - the machine is added (ModelAdmin.AddMachines) when it does not exist,
//     with its host first for a container; ids are given out in order, so
//     only the next free id of its host can be added;
//   - its provisioner (the controller agent for a top-level machine, the
//     host's agent, itself made ready, for a container) sets a fresh
//     password (Provisioner.SetPasswords) and records an instance with a
//     fresh nonce "<provisioner-tag>:<random>" (SetInstanceInfo), then
//     sets the instance status "running".
//
// A machine this Server made ready before gets the same login again. A
// machine provisioned by someone else fails t: its nonce is not known.
func (s *Server) ProvisionMachine(t testing.TB, model, id string) AgentLogin {
	t.Helper()
	uuid, err := s.modelUUID(model)
	if err != nil {
		t.Fatalf("provisiondtest: provision machine %s: %v", id, err)
	}
	s.provMu.Lock() // one provisioning at a time: ids are given out in order
	defer s.provMu.Unlock()
	login, err := s.provision(uuid, id, 0)
	if err != nil {
		t.Fatalf("provisiondtest: provision machine %s: %v", id, err)
	}
	return login
}

func (s *Server) provision(model, id string, depth int) (AgentLogin, error) {
	if model == "" {
		return AgentLogin{}, errors.New("a machine needs a model: pass a model's name or UUID")
	}
	if depth > 8 {
		return AgentLogin{}, errors.New("containers nested too deep")
	}
	key := agentKey{model, id}
	s.mu.Lock()
	login, ok := s.agents[key]
	s.mu.Unlock()
	if ok {
		return login, nil
	}
	if err := s.ensureMachine(model, id); err != nil {
		return AgentLogin{}, err
	}
	parent, _ := hostOf(id)

	// The machine's provisioner: the controller agent, or the host's agent.
	var prov *client.Conn
	var provTag string
	var err error
	if parent == "" {
		prov, err = s.ownConn(model, "controller", func(c *client.Conn, ctx context.Context) error {
			_, err := c.LoginControllerAgent(ctx, s.Credentials())
			return err
		})
		provTag = s.Credentials().ControllerAgent.Tag
	} else {
		var host AgentLogin
		if host, err = s.provision(model, parent, depth+1); err != nil {
			return AgentLogin{}, fmt.Errorf("host %s: %w", parent, err)
		}
		prov, err = s.ownConn(model, parent, func(c *client.Conn, ctx context.Context) error {
			_, err := c.LoginAgent(ctx, host.Tag, host.Password, host.Nonce)
			return err
		})
		provTag = host.Tag
	}
	if err != nil {
		return AgentLogin{}, err
	}

	ctx, cancel := callCtx()
	defer cancel()
	tag := client.MachineTag(id)
	m := client.NewProvisioner(prov).Machine(tag)
	if inst, err := m.InstanceId(ctx); err == nil {
		return AgentLogin{}, fmt.Errorf("%s is already provisioned (instance %q) outside provisiondtest: its nonce is not known", tag, inst)
	} else if !errors.Is(err, client.ErrNotProvisioned) {
		return AgentLogin{}, err
	}
	login = AgentLogin{Model: model, Tag: tag, Password: randomString(), Nonce: provTag + ":" + randomString()}
	if err := m.SetPassword(ctx, login.Password); err != nil {
		return AgentLogin{}, fmt.Errorf("SetPasswords: %w", err)
	}
	if err := m.SetInstanceInfo(ctx, params.InstanceInfo{
		InstanceId: "provisiondtest-" + strings.ReplaceAll(id, "/", "-"), Nonce: login.Nonce,
	}); err != nil {
		return AgentLogin{}, fmt.Errorf("SetInstanceInfo: %w", err)
	}
	if err := m.SetInstanceStatus(ctx, "running", "", nil); err != nil {
		return AgentLogin{}, fmt.Errorf("SetInstanceStatus: %w", err)
	}
	s.mu.Lock()
	s.agents[key] = login
	s.mu.Unlock()
	return login, nil
}

// hostOf splits a container id into its host and container type
// ("1/lxd/0": "1", "lxd"); a top-level machine has neither.
func hostOf(id string) (parent, ctype string) {
	parts := strings.Split(id, "/")
	if len(parts) < 3 {
		return "", ""
	}
	return strings.Join(parts[:len(parts)-2], "/"), parts[len(parts)-2]
}

// ensureMachine adds machine id (and its hosts first) through ModelAdmin
// when it does not exist.
func (s *Server) ensureMachine(model, id string) error {
	parent, ctype := hostOf(id)
	want, err := strconv.Atoi(id[strings.LastIndex(id, "/")+1:])
	if err != nil || (parent == "" && strings.Contains(id, "/")) {
		return fmt.Errorf("bad machine id %q", id)
	}
	admin, err := s.ownConn(model, "admin", func(c *client.Conn, ctx context.Context) error {
		_, err := c.LoginAdmin(ctx, s.Credentials())
		return err
	})
	if err != nil {
		return err
	}
	ma := client.NewModelAdmin(admin)
	ctx, cancel := callCtx()
	defer cancel()
	status, err := ma.Status(ctx, params.ModelArgs{})
	if err != nil {
		return fmt.Errorf("ModelAdmin.Status: %w", err)
	}
	if hasMachine(status.Machines, id) {
		return nil
	}
	args := params.AddMachinesArgs{}
	if parent != "" {
		if err := s.ensureMachine(model, parent); err != nil {
			return err
		}
		args.Placement = ctype + ":" + parent
	}
	for {
		res, err := ma.AddMachines(ctx, args)
		if err != nil {
			return fmt.Errorf("ModelAdmin.AddMachines: %w", err)
		}
		got := res.Machines[0]
		if got == id {
			return nil
		}
		if n, _ := strconv.Atoi(got[strings.LastIndex(got, "/")+1:]); n > want {
			return fmt.Errorf("machine %s cannot be added: the next id was %s", id, got)
		}
	}
}

func hasMachine(ms []params.MachineStatus, id string) bool {
	for _, m := range ms {
		if m.ID == id || hasMachine(m.Containers, id) {
			return true
		}
	}
	return false
}

// ownConn returns the Server's own logged-in connection to model for who,
// dialling and logging in afresh when there is none or it has ended (an
// agent connection that does not ping is closed after the ping timeout).
func (s *Server) ownConn(model, who string, login func(*client.Conn, context.Context) error) (*client.Conn, error) {
	key := connKey{model, who}
	s.mu.Lock()
	c := s.conns[key]
	s.mu.Unlock()
	if c != nil && c.Err() == nil {
		return c, nil
	}
	c, err := s.dial(model)
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx()
	defer cancel()
	if err := login(c, ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("login as %s: %w", who, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, errors.New("the server is closed")
	}
	if old := s.conns[key]; old != nil {
		_ = old.Close()
	}
	s.conns[key] = c
	return c, nil
}

func randomString() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
