package provisiondtest

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/rpc/params"
)

// startAgent runs the reference agent on a simulated cloud against s's
// daemon, logged in with the credentials it wrote, as
// `provisiond serve --agent sim` does. The Server calls the returned stop
// first when it closes.
func startAgent(s *Server, log *slog.Logger) (stop func(), err error) {
	return agent.Start(agent.Config{
		Credentials: s.Credentials(), Addrs: []string{s.Addr()}, Cloud: agent.NewSimCloud(),
		Logger: log,
		// A daemon on loopback that went away (a test stopping it) is
		// retried soon.
		MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Second,
	})
}

// WaitStatus waits until cond holds for model's status (a name or UUID;
// ModelAdmin.Status, what `provisionctl status` shows) and returns that
// status. It reads the status again at each change of the model
// (ModelAdmin.WatchModel), for at most CallTimeout in all, and fails t
// with the last status otherwise. With WithAgent it is how a test waits
// for the agent's work, e.g. a machine started with an instance:
//
//	st := srv.WaitStatus(t, "default", func(st params.ModelStatus) bool {
//		return len(st.Machines) == 1 && st.Machines[0].AgentStatus.Status == "started"
//	})
func (s *Server) WaitStatus(t testing.TB, model string, cond func(params.ModelStatus) bool) params.ModelStatus {
	t.Helper()
	st, err := s.waitStatus(model, cond)
	if err != nil {
		t.Fatalf("provisiondtest: %v", err)
	}
	return st
}

func (s *Server) waitStatus(model string, cond func(params.ModelStatus) bool) (params.ModelStatus, error) {
	uuid, err := s.modelUUID(model)
	if err != nil {
		return params.ModelStatus{}, err
	}
	if uuid == "" {
		return params.ModelStatus{}, errors.New("WaitStatus needs a model's name or UUID")
	}
	ma, err := s.modelAdmin()
	if err != nil {
		return params.ModelStatus{}, err
	}
	ctx, cancel := callCtx()
	defer cancel()
	w, err := ma.WatchModel(ctx, params.ModelArgs{Model: uuid})
	if err != nil {
		return params.ModelStatus{}, fmt.Errorf("ModelAdmin.WatchModel %q: %w", model, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		// The watch is made first, so a change after this read is not
		// missed.
		st, err := ma.Status(ctx, params.ModelArgs{Model: uuid})
		if err != nil {
			return st, fmt.Errorf("ModelAdmin.Status %q: %w", model, err)
		}
		if cond(st) {
			return st, nil
		}
		select {
		case _, ok := <-w.Changes():
			if !ok {
				return st, fmt.Errorf("the watch of model %q ended: %v; its last status: %+v", model, w.Err(), st)
			}
		case <-ctx.Done():
			return st, fmt.Errorf("model %q: the condition did not hold within %v; its last status: %+v", model, CallTimeout, st)
		}
	}
}
