package state

import (
	"encoding/json"
	"fmt"

	"github.com/juju/errors"
)

// Config size limits. Config comes from clients (model,
// controller and application config, storage pool and volume attributes)
// and is sent back whole to every agent that reads it: a 69 MB value made
// a reply over python-libjuju's 4 MiB limit. Sizes are of the JSON
// encoding.
const (
	// MaxConfigKey is the longest config key, in bytes. Juju's keys are
	// under 64.
	MaxConfigKey = 256
	// MaxConfigValue is the largest config value, in bytes of JSON: room
	// for a cloud-init user-data or a bundle of certificates.
	MaxConfigValue = 256 << 10
	// MaxConfigTotal is the largest config, all keys and values, in bytes
	// of JSON: a ModelConfig or ApplicationsConfig reply stays far under
	// python-libjuju's 4 MiB.
	MaxConfigTotal = 1 << 20
)

// checkConfigEntries refuses a config (as set, before it is merged) with a
// key or a value over the limits, or over MaxConfigTotal in all; encoded
// is its JSON encoding.
func checkConfigEntries(cfg map[string]any, encoded []byte) error {
	for k, v := range cfg {
		if len(k) > MaxConfigKey {
			return errors.NotValidf("config key %s: %d bytes (limit %d)", quotePrefix(k), len(k), MaxConfigKey)
		}
		if len(encoded) <= MaxConfigValue {
			continue // no value can be over the limit
		}
		b, err := json.Marshal(v)
		if err != nil {
			return errors.NewNotValid(err, "config")
		}
		if len(b) > MaxConfigValue {
			return errors.NotValidf("config value of %q: %d bytes (limit %d)", k, len(b), MaxConfigValue)
		}
	}
	if len(encoded) > MaxConfigTotal {
		return errors.NotValidf("config of %d bytes (limit %d)", len(encoded), MaxConfigTotal)
	}
	return nil
}

// checkConfigTotal refuses a config, as it would be after an update, over
// MaxConfigTotal.
func checkConfigTotal(cfg map[string]any) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return errors.NewNotValid(err, "config")
	}
	if len(b) > MaxConfigTotal {
		return errors.NotValidf("config of %d bytes after the update (limit %d)", len(b), MaxConfigTotal)
	}
	return nil
}

// quotePrefix quotes at most the first 64 bytes of a client's string.
func quotePrefix(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", s[:64])
}
