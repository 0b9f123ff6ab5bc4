package state

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/juju/errors"
)

// normalizeConfig returns cfg as it will read back from the database: a
// JSON round trip, so numbers become float64 and structs become maps.
// Comparing normalized configs tells whether an update changes anything.
func normalizeConfig(cfg map[string]any) (map[string]any, error) {
	out := map[string]any{}
	if len(cfg) == 0 {
		return out, nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, errors.NewNotValid(err, "config")
	}
	if err := checkConfigEntries(cfg, b); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, errors.NewNotValid(err, "config")
	}
	return out, nil
}

// applyConfig returns old with set applied and the keys in unset removed,
// and whether that differs from old. set must be normalized. old is not
// modified.
func applyConfig(old, set map[string]any, unset []string) (map[string]any, bool) {
	next := maps.Clone(old)
	if next == nil {
		next = map[string]any{}
	}
	maps.Copy(next, set)
	for _, k := range unset {
		delete(next, k)
	}
	return next, !configEqual(old, next)
}

// configEqual compares two normalized configs. encoding/json sorts map
// keys, so equal configs encode to equal bytes.
func configEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
