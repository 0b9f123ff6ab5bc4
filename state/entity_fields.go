package state

import (
	"context"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// EntityFields returns the stored fields of one record of a model (kind
// and id as WatchModelChanges names them: KindModel with the model's
// UUID, or a kind of ModelKinds or ModelRecordKinds), as JSON decodes
// them, for operators' watch output. Secrets are left out: every field
// whose name holds "password" or "secret". It reports false when the
// record does not exist.
func (st *State) EntityFields(ctx context.Context, kind watcher.Kind, model, id string) (map[string]any, bool, error) {
	if kind != KindModel && !isModelKind(kind) {
		return nil, false, errors.NotValidf("kind %q", kind)
	}
	var out map[string]any
	var ok bool
	err := st.view(ctx, func(r reader) error {
		var err error
		out = nil
		ok, err = get(r, kind, model, id, &out)
		return err
	})
	if err != nil || !ok {
		return nil, false, err
	}
	dropSecrets(out)
	return out, true, nil
}

func isModelKind(k watcher.Kind) bool {
	for _, m := range ModelKinds {
		if m == k {
			return true
		}
	}
	for _, m := range ModelRecordKinds {
		if m == k {
			return true
		}
	}
	return false
}

// dropSecrets removes, at any depth, the fields whose names hold
// "password" or "secret".
func dropSecrets(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, f := range v {
			lk := strings.ToLower(k)
			if strings.Contains(lk, "password") || strings.Contains(lk, "secret") {
				delete(v, k)
				continue
			}
			dropSecrets(f)
		}
	case []any:
		for _, f := range v {
			dropSecrets(f)
		}
	}
}
