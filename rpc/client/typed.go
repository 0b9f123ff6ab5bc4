package client

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/provisiond/provisiond/rpc/params"
)

// What the typed facade clients (Provisioner, CAASUnitProvisioner,
// ModelAdmin) share.

// Entities returns the params.Entities naming tags, in order: the
// argument of most bulk calls.
func Entities(tags ...string) params.Entities {
	out := params.Entities{Entities: make([]params.Entity, len(tags))}
	for i, t := range tags {
		out.Entities[i].Tag = t
	}
	return out
}

// MachineTag returns the tag of machine id: "0" is "machine-0",
// "0/lxd/1" is "machine-0-lxd-1".
func MachineTag(id string) string { return "machine-" + strings.ReplaceAll(id, "/", "-") }

// ModelTag returns the tag of model uuid ("model-UUID").
func ModelTag(uuid string) string { return "model-" + uuid }

// ApplicationTag returns the tag of application name ("application-NAME").
func ApplicationTag(name string) string { return "application-" + name }

// UnitTag returns the tag of unit name: "gitlab/0" is "unit-gitlab-0".
func UnitTag(name string) string { return "unit-" + strings.ReplaceAll(name, "/", "-") }

// facade is one version of a facade on a connection: what every typed
// client calls through, with call and bulk.
type facade struct {
	c       *Conn
	name    string
	version int
}

// call makes one call of method, decoding its result into result (nil:
// none is read).
func (f facade) call(ctx context.Context, method string, args, result any) error {
	return f.c.Call(ctx, f.name, f.version, "", method, args, result)
}

// call makes one call and decodes its result into a fresh R.
func call[R any](ctx context.Context, f facade, method string, args any) (R, error) {
	var r R
	err := f.call(ctx, method, args, &r)
	return r, err
}

// bulk is call for a bulk method of n items: a reply whose Results do not
// have one item per argument item is an error, so callers may index the
// results by argument position. Per-item errors stay in the results.
func bulk[R any](ctx context.Context, f facade, method string, args any, n int) (R, error) {
	r, err := call[R](ctx, f, method, args)
	if err != nil {
		return r, err
	}
	if got := reflect.ValueOf(r).FieldByName("Results").Len(); got != n {
		return r, fmt.Errorf("client: %s.%s: %d results for %d items", f.name, method, got, n)
	}
	return r, nil
}

// itemErr returns a result item's error as an error: nil (not a typed
// nil) when the item succeeded.
func itemErr(e *params.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// oneErr is the error of a one-item ErrorResults call.
func oneErr(res params.ErrorResults, err error) error {
	if err != nil {
		return err
	}
	return itemErr(res.Results[0].Error)
}
