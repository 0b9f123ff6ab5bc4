package modeladmin

import (
	"context"
	"fmt"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

func registerEntities(m *methods) {
	rpc.Handle(m, "ModelEntities", (*ModelAdmin).ModelEntities)
}

// MaxModelEntities bounds the entities of one ModelEntities call.
const MaxModelEntities = 1000

// ModelEntities returns the current stored fields of entities of a model,
// named "<kind>/<id>" as WatchModel reports them, so that a watcher can
// show what changed (provisionctl watch), as etcdctl watch shows values.
// Secrets (password hashes) are left out. An entity that no longer exists
// is reported removed. The fields are the store's own: they follow the
// record's schema, not a stable wire type.
func (a *ModelAdmin) ModelEntities(ctx context.Context, args params.ModelEntitiesArgs) (params.ModelEntitiesResult, error) {
	m, err := a.model(ctx, args.Model)
	uuid := m.UUID
	switch {
	case err == nil:
	case errors.Is(err, errors.NotFound) && state.IsValidUUID(args.Model):
		// A removed model, by UUID: its entities are all gone, which
		// is what a watcher that saw the removal asks about.
		uuid = args.Model
	default:
		return params.ModelEntitiesResult{}, err
	}
	if len(args.Entities) > MaxModelEntities {
		return params.ModelEntitiesResult{}, errors.NewNotValid(nil, fmt.Sprintf("%d entities: at most %d per call", len(args.Entities), MaxModelEntities))
	}
	out := params.ModelEntitiesResult{Entities: make([]params.EntityValue, 0, len(args.Entities))}
	for _, e := range args.Entities {
		kind, id, ok := strings.Cut(e, "/")
		if !ok || kind == "" || id == "" {
			return params.ModelEntitiesResult{}, errors.NewNotValid(nil, fmt.Sprintf("entity %q not valid: want KIND/ID, such as machine/0", e))
		}
		v := params.EntityValue{Kind: kind, ID: id}
		fields, found, err := a.st.EntityFields(ctx, watcher.Kind(kind), uuid, id)
		if err != nil {
			return params.ModelEntitiesResult{}, err
		}
		if found {
			v.Value = fields
		} else {
			v.Removed = true
		}
		out.Entities = append(out.Entities, v)
	}
	return out, nil
}
