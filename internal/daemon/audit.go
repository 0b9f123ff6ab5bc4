package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

// The audit trail (audit.go). Every API call that may change state is
// logged at info as it returns, with who made it (the tag logged in on the
// connection), from where (the remote address), what (facade, version,
// method, the connection's model and the call's params, secrets redacted
// and long values cut) and the outcome ("ok" or the error code and
// message). Refused logins are logged at warn with the remote address and
// the tag tried. With Config.AuditLog the same records are appended to a
// file as JSON lines (mode 0600; not synced per line: an audit record is
// not worth an fsync on every agent's status update; reopened on Reload,
// for log rotation).
//
// Which calls may change state is decided by method name (IsMutation):
// Juju's facades name their writes with a verb (Set, Add, Remove, Update,
// EnsureDead, ...). TestAuditClassification lists every registered method
// with its class, so a new method is classified on purpose.

// auditor writes the audit trail; its methods are safe for concurrent use.
type auditor struct {
	log  *slog.Logger
	path string

	mu sync.Mutex // guards f
	f  *os.File
}

func newAuditor(log *slog.Logger, path string) (*auditor, error) {
	a := &auditor{log: log, path: path}
	if path == "" {
		return a, nil
	}
	if err := a.reopen(); err != nil {
		return nil, err
	}
	return a, nil
}

// reopen opens the audit log again (after a rotation moved it away).
func (a *auditor) reopen() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	a.mu.Lock()
	old := a.f
	a.f = f
	a.mu.Unlock()
	if old != nil {
		return old.Close()
	}
	return nil
}

func (a *auditor) close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// auditRecord is one line of the audit log.
type auditRecord struct {
	Time    string `json:"time"`
	Event   string `json:"event"` // "mutation" or "login-refused"
	Who     string `json:"who"`   // the tag logged in, or tried
	Remote  string `json:"remote"`
	Model   string `json:"model,omitempty"`
	Facade  string `json:"facade"`
	Version int    `json:"version"`
	Method  string `json:"method"`
	// Params are the call's params, with secrets redacted ("[redacted]")
	// and long values cut; absent for logins.
	Params json.RawMessage `json:"params,omitempty"`
	// Outcome is "ok", or the error's code ("error" when it has none).
	Outcome    string  `json:"outcome"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration-ms"`
}

// enabled reports whether a record would go anywhere: the audit log, or
// a log that takes info (warn for refused logins). Without either, calls
// are not wrapped (benchmarks log nothing).
func (a *auditor) enabled(login bool) bool {
	if a.path != "" {
		return true
	}
	lvl := slog.LevelInfo
	if login {
		lvl = slog.LevelWarn
	}
	return a.log.Enabled(context.Background(), lvl)
}

func (a *auditor) write(r auditRecord) {
	attrs := []any{"who", r.Who, "remote", r.Remote, "facade", r.Facade, "method", r.Method, "outcome", r.Outcome}
	if r.Model != "" {
		attrs = append(attrs, "model", r.Model)
	}
	if r.Event == "login-refused" {
		a.log.Warn("login refused", append(attrs, "reason", r.Error)...)
	} else {
		if len(r.Params) > 0 {
			p := string(r.Params)
			if len(p) > 512 {
				p = p[:509] + "..."
			}
			attrs = append(attrs, "params", p)
		}
		if r.Error != "" {
			attrs = append(attrs, "error", r.Error)
		}
		a.log.Info("mutation", attrs...)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	if _, err := a.f.Write(append(b, '\n')); err != nil {
		a.log.Error("cannot write the audit log", "path", a.path, "err", err)
	}
}

// mutationVerbs are the verbs of change: a method whose first word is one
// of them may change state (DeploymentMode is a read).
var mutationVerbs = []string{"Add", "Set", "Remove", "Update", "Deploy", "Create", "Scale", "Destroy",
	"Ensure", "Mark", "Release", "Prepare", "Clear", "Allocate", "Assign", "Unassign", "Upgrade",
	"Rotate", "Reset", "Repair", "Import", "Restore", "Open", "Close", "Expose", "Unexpose", "Trust", "Attach", "Detach",
	"Complete"}

// IsMutation reports whether a method may change state: the calls the
// audit trail records. Its first word is a verb of change: the verb, then
// the end of the name or an upper-case letter. (It runs for every call: a
// prefix test, not a regular expression, which was 1% of the daemon's CPU
// at 64 writers.)
func IsMutation(method string) bool {
	for _, v := range mutationVerbs {
		if strings.HasPrefix(method, v) && (len(method) == len(v) || method[len(v)] >= 'A' && method[len(v)] <= 'Z') {
			return true
		}
	}
	return false
}

// audited wraps NewRoot so that every connection's mutations and logins
// reach the audit trail.
func (a *auditor) audited(newRoot func(rpc.ConnInfo, *rpc.Conn) rpc.Root) func(rpc.ConnInfo, *rpc.Conn) rpc.Root {
	return func(info rpc.ConnInfo, c *rpc.Conn) rpc.Root {
		return &auditRoot{Root: newRoot(info, c), a: a, info: info}
	}
}

type auditRoot struct {
	rpc.Root
	a    *auditor
	info rpc.ConnInfo
}

// Authenticated forwards rpc.Authenticator, which rpc asks of the Root for
// the read limit and one-call-at-a-time rule before login. (Every optional
// interface rpc asks of a Root must be forwarded here.)
func (r *auditRoot) Authenticated() bool {
	a, ok := r.Root.(rpc.Authenticator)
	return !ok || a.Authenticated()
}

// sessionInfo is what the facade session tells the audit trail.
type sessionInfo interface {
	AuthTag() string
	ModelUUID() string
}

func (r *auditRoot) FindMethod(req rpc.Request) (rpc.Caller, error) {
	call, err := r.Root.FindMethod(req)
	if err != nil {
		return call, err
	}
	fac, version, method := req.Facade, req.Version, req.Method
	login := fac == "Admin" && method == "Login"
	if !login && !IsMutation(method) || !r.a.enabled(login) {
		return call, nil
	}
	return rpc.CallerFunc(func(ctx context.Context, raw json.RawMessage) (any, error) {
		start := time.Now()
		res, err := call.Call(ctx, raw)
		if login && err == nil {
			return res, err
		}
		rec := auditRecord{Time: start.UTC().Format(time.RFC3339Nano), Event: "mutation", Remote: r.info.RemoteAddr,
			Facade: fac, Version: version, Method: method, Outcome: "ok",
			DurationMS: float64(time.Since(start).Microseconds()) / 1000}
		if s, ok := r.Root.(sessionInfo); ok {
			rec.Who, rec.Model = s.AuthTag(), s.ModelUUID()
		}
		if err != nil {
			rec.Outcome = params.ErrCode(err)
			if rec.Outcome == "" {
				rec.Outcome = "error"
			}
			rec.Error = err.Error()
		}
		if login {
			rec.Event = "login-refused"
			var req struct {
				AuthTag string `json:"auth-tag"`
			}
			_ = json.Unmarshal(raw, &req)
			rec.Who = facade.Bounded(req.AuthTag) // anyone may send a huge tag
		} else {
			rec.Params = redact(raw)
		}
		r.a.write(rec)
		return res, err
	}), nil
}

// Bounds of the params an audit record keeps.
const (
	auditMaxString = 256
	auditMaxItems  = 100
	auditMaxParams = 8 << 10
)

// secretKey matches the params fields whose values are never recorded.
var secretKey = regexp.MustCompile(`(?i)password|secret|token|credential|private|(^|-)key$`)

// redact returns params with secret fields replaced by "[redacted]",
// strings longer than auditMaxString cut, lists longer than auditMaxItems
// cut, and the whole at most auditMaxParams bytes.
func redact(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("(%d bytes, not JSON)", len(raw))))
	}
	v = redactValue(v)
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	if len(b) > auditMaxParams {
		b, _ = json.Marshal(fmt.Sprintf("(%d bytes, cut) %s...", len(b), b[:auditMaxParams/2]))
	}
	return b
}

func redactValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, f := range x {
			if secretKey.MatchString(k) {
				x[k] = "[redacted]"
				continue
			}
			x[k] = redactValue(f)
		}
		return x
	case []any:
		if len(x) > auditMaxItems {
			n := len(x)
			x = append(x[:auditMaxItems:auditMaxItems], fmt.Sprintf("(%d more)", n-auditMaxItems))
		}
		for i, f := range x {
			x[i] = redactValue(f)
		}
		return x
	case string:
		if len(x) > auditMaxString {
			return fmt.Sprintf("%s...(%d bytes)", strings.ToValidUTF8(x[:auditMaxString/2], ""), len(x))
		}
	}
	return v
}
