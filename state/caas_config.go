package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// appConfigDoc is an application's config settings (Juju's
// "<app>#application" settings document).
type appConfigDoc struct {
	Settings map[string]any `json:"settings,omitempty"`
}

// configHash is the hash WatchApplicationsTrustHash reports: SHA-256 of
// the settings key and the settings as JSON (map keys sorted), lower-case
// hex. Juju hashes BSON; the value is only ever compared with itself.
func configHash(app string, settings map[string]any) string {
	h := sha256.New()
	h.Write([]byte(app + "#application"))
	b, _ := json.Marshal(settings)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func hashField(c watcher.Change) (string, bool) {
	for _, f := range c.Fields {
		if h, ok := strings.CutPrefix(f, fieldHashPrefix); ok {
			return h, true
		}
	}
	return "", false
}

// ApplicationConfig returns an application's config settings.
func (st *State) ApplicationConfig(ctx context.Context, model, app string) (map[string]any, error) {
	var d appConfigDoc
	err := st.view(ctx, func(r reader) error {
		if _, err := getApplication(r, model, app); err != nil {
			return err
		}
		_, err := get(r, KindApplicationConfig, model, app, &d)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.Settings == nil {
		d.Settings = map[string]any{}
	}
	return d.Settings, nil
}

// UpdateApplicationConfig sets and removes keys of an application's
// config. "trust" must be a bool. A call that changes nothing writes
// nothing.
func (st *State) UpdateApplicationConfig(ctx context.Context, model, app string, set map[string]any, unset []string) error {
	set, err := normalizeConfig(set)
	if err != nil {
		return err
	}
	if v, ok := set["trust"]; ok {
		if _, isBool := v.(bool); !isBool {
			return errors.NotValidf("trust %v (want a bool)", v)
		}
	}
	return st.update(ctx, func(tx *txn) error {
		if _, err := getApplication(tx, model, app); err != nil {
			return err
		}
		var d appConfigDoc
		if _, err := get(tx, KindApplicationConfig, model, app, &d); err != nil {
			return err
		}
		next, changed := applyConfig(d.Settings, set, unset)
		if !changed {
			return errNoChange
		}
		if err := checkConfigTotal(next); err != nil {
			return err
		}
		d.Settings = next
		return tx.put(KindApplicationConfig, model, app, &d, FieldConfig, fieldHashPrefix+configHash(app, next))
	})
}

// SetApplicationTrust sets an application's "trust" config option.
func (st *State) SetApplicationTrust(ctx context.Context, model, app string, trust bool) error {
	return st.UpdateApplicationConfig(ctx, model, app, map[string]any{"trust": trust}, nil)
}

// ApplicationConfigHash returns the hash of an application's config that
// WatchApplicationTrustHash reports ("" when it has none).
func (st *State) ApplicationConfigHash(ctx context.Context, model, app string) (string, error) {
	var (
		d  appConfigDoc
		ok bool
	)
	err := st.view(ctx, func(r reader) error {
		var err error
		ok, err = get(r, KindApplicationConfig, model, app, &d)
		return err
	})
	if err != nil || !ok {
		return "", err
	}
	return configHash(app, d.Settings), nil
}
