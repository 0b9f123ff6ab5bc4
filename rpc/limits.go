package rpc

import (
	"context"
	"reflect"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/provisiond/provisiond/rpc/params"
)

// What one connection may make the server hold (docs/reliability.md,
// Limits). A bulk call's cost grows with its items, not with its bytes: a
// 4 MiB list of one machine tag made a 228 MB ProvisioningInfo reply and
// 12 s of CPU. So:
//
//   - a call whose params hold more than Config.MaxBulkItems list items is
//     refused before the method runs (code "quota limit exceeded");
//   - the calls running on one connection hold at most MaxBulkItems items
//     between them; a call waits for its share, first come first served,
//     and gives it back once its reply is queued;
//   - the requests being served on one connection hold at most
//     Config.ReadLimit bytes of messages between them (one request alone
//     may be as large as the read limit); the reader stops reading until
//     they are answered;
//   - a reply over Config.MaxReplySize is not sent: the call gets code
//     "quota limit exceeded" instead;
//   - the replies waiting to be written hold at most Config.MaxUnsent bytes
//     (one reply alone may be larger); the handler that would go over it
//     waits, and a client that does not read is dropped after the write
//     timeout;
//   - before login (see Authenticator) a message may be at most
//     Config.PreLoginReadLimit bytes and the connection serves one request
//     at a time.
//
// Facades stop their per-item work when the connection ends (facade.Bulk
// checks the call's context between items).

// Authenticator is implemented by a Root whose connection logs in. While
// Authenticated reports false, the connection reads messages of at most
// Config.PreLoginReadLimit bytes and serves one request at a time: nothing
// but the login is reachable yet, and a login is small. The reader asks
// between requests, after the previous one was answered, so a login that
// succeeds raises the limit for the very next message.
type Authenticator interface {
	Authenticated() bool
}

// callKey finds a call's callCtx among its context's values.
type callKey struct{}

// callCtx is the context of one call: the connection's context (whose
// methods it forwards: it does not keep it, a waiting call is a word
// smaller) plus the call's share of the connection's item budget. It
// lives in the call's header, so a call costs no extra allocation.
type callCtx struct {
	conn  *Conn
	items int64         // taken from conn.items; given back by finish
	rev   *callRevision // the request named a from-revision (revisions.go)
	later Later         // the call's Later, if it replies later (newLater)
}

// Deadline implements context.Context: the connection context's.
func (cc *callCtx) Deadline() (time.Time, bool) { return cc.conn.ctx.Deadline() }

// Done implements context.Context: the connection context's.
func (cc *callCtx) Done() <-chan struct{} { return cc.conn.ctx.Done() }

// Err implements context.Context: the connection context's.
func (cc *callCtx) Err() error { return cc.conn.ctx.Err() }

// Value implements context.Context.
func (cc *callCtx) Value(key any) any {
	if key == (callKey{}) {
		return cc
	}
	return cc.conn.ctx.Value(key)
}

// takeItems charges n list items to the call running with ctx: over the
// connection's per-call limit it returns TooManyItemsError; otherwise it
// waits for n items of the connection's budget. A context that is not a
// call's (in-process callers, tests) has no limit.
func takeItems(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	cc, _ := ctx.Value(callKey{}).(*callCtx)
	if cc == nil || cc.conn.items == nil {
		return nil
	}
	limit := cc.conn.srv.cfg.MaxBulkItems
	if n > limit {
		return TooManyItemsError(n, limit)
	}
	// TryAcquire first: Acquire asks the connection's context for its Done
	// channel, which the context then makes and keeps for the life of
	// the connection (96 bytes per agent) though it is rarely waited on.
	if cc.conn.ctx.Err() != nil {
		return ErrShutdown
	}
	if !cc.conn.items.TryAcquire(int64(n)) {
		if err := cc.conn.items.Acquire(cc.conn.ctx, int64(n)); err != nil {
			return ErrShutdown
		}
	}
	cc.items += int64(n)
	return nil
}

// newItemBudget returns the item budget of a connection, or nil for no
// limit.
func newItemBudget(limit int) *semaphore.Weighted {
	if limit <= 0 {
		return nil
	}
	return semaphore.NewWeighted(int64(limit))
}

// maxCountDepth is how deep itemCounter looks for lists: a top-level list
// and the lists inside its elements (SetObservedNetworkConfig's
// interfaces, UpdateApplicationsUnits' units), through structs and
// pointers.
const maxCountDepth = 2

// itemCounter returns a function that counts the list items of a params
// value of type t (a pointer to it), or nil when t holds no lists. It is
// built once per method at registration; a call only reads lengths, and
// walks the elements of a list only when they hold lists themselves.
func itemCounter(t reflect.Type) func(any) int {
	if t == reflect.TypeFor[params.Entities]() {
		return func(a any) int { return len(a.(*params.Entities).Entities) }
	}
	count := countValue(t, 0)
	if count == nil {
		return nil
	}
	return func(a any) int { return count(reflect.ValueOf(a).Elem()) }
}

func countValue(t reflect.Type, depth int) func(reflect.Value) int {
	switch t.Kind() {
	case reflect.Pointer:
		elem := countValue(t.Elem(), depth)
		if elem == nil {
			return nil
		}
		return func(v reflect.Value) int {
			if v.IsNil() {
				return 0
			}
			return elem(v.Elem())
		}
	case reflect.Struct:
		type field struct {
			index int
			count func(reflect.Value) int
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if c := countValue(f.Type, depth); c != nil {
				fields = append(fields, field{i, c})
			}
		}
		if len(fields) == 0 {
			return nil
		}
		return func(v reflect.Value) int {
			n := 0
			for _, f := range fields {
				n += f.count(v.Field(f.index))
			}
			return n
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 || depth >= maxCountDepth {
			return nil // bytes are a value, not items
		}
		elem := countValue(t.Elem(), depth+1)
		if elem == nil {
			return func(v reflect.Value) int { return v.Len() }
		}
		return func(v reflect.Value) int {
			n := v.Len()
			for i := range v.Len() {
				n += elem(v.Index(i))
			}
			return n
		}
	}
	return nil
}
