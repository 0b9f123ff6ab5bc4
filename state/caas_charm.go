package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/watcher"
)

// CharmOption is one option of a charm's config.yaml.
type CharmOption struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Default     any    `json:"default,omitempty"`
}

// CharmActionSpec is one action of a charm's actions.yaml.
type CharmActionSpec struct {
	Description string         `json:"description"`
	Params      map[string]any `json:"params,omitempty"`
}

// CharmBase is one base of a charm's manifest.
type CharmBase struct {
	Name          string   `json:"name"`
	Channel       string   `json:"channel"`
	Architectures []string `json:"architectures,omitempty"`
}

// Charm is a charm deployed in a model, keyed by URL.
type Charm struct {
	URL        string                     `json:"url"`
	Revision   int                        `json:"revision"`
	Meta       *charm.Meta                `json:"meta"`
	Config     map[string]CharmOption     `json:"config,omitempty"`
	Actions    map[string]CharmActionSpec `json:"actions,omitempty"`
	Bases      []CharmBase                `json:"bases,omitempty"`
	LXDProfile *LXDProfile                `json:"lxd-profile,omitempty"`
}

type charmDoc struct {
	Model string `json:"model"`
	Charm
}

// Charm returns the charm of a model with the given URL.
func (st *State) Charm(ctx context.Context, model, url string) (Charm, error) {
	var d charmDoc
	err := st.view(ctx, func(r reader) error {
		ok, err := get(r, KindCharm, model, url, &d)
		if err == nil && !ok {
			err = errors.NotFoundf("charm %q", url)
		}
		return err
	})
	return d.Charm, err
}

// Local charms: a deploy that gives metadata without a charm URL stores
// its charm as "local:NAME-REV".
const (
	LocalCharmPrefix = "local:"
	// MaxLocalCharmRevisions bounds the local charm revisions of one
	// charm name in a model.
	MaxLocalCharmRevisions = 1000
)

// deployCharm stores the charm of a deploy in model m, unless a charm is
// stored under its URL already (a URL names one charm), and returns it
// with its URL. A charm without a URL is a local charm: its URL is
// "local:NAME-REV" with the lowest revision that holds the same metadata or
// is free. The choice is read and written in the deploy's transaction, so
// two deploys of different metadata under one name, through any daemons,
// never share a URL (the transaction of the later one re-runs and sees the
// revision taken).
func (tx *txn) deployCharm(m modelDoc, ch Charm) (Charm, error) {
	if ch.URL == "" {
		want, err := json.Marshal(ch.Meta)
		if err != nil {
			return Charm{}, errors.Trace(err)
		}
		for rev := range MaxLocalCharmRevisions {
			url := fmt.Sprintf("%s%s-%d", LocalCharmPrefix, ch.Meta.Name, rev)
			var d charmDoc
			ok, err := get(tx, KindCharm, m.UUID, url, &d)
			if err != nil {
				return Charm{}, err
			}
			if !ok {
				ch.URL, ch.Revision = url, rev
				break
			}
			if got, err := json.Marshal(d.Meta); err == nil && bytes.Equal(got, want) {
				return d.Charm, nil
			}
		}
		if ch.URL == "" {
			return Charm{}, errors.NewQuotaLimitExceeded(nil,
				fmt.Sprintf("charm %q has %d revisions in model %q", ch.Meta.Name, MaxLocalCharmRevisions, m.Name))
		}
	}
	if ok, err := exists(tx, KindCharm, m.UUID, ch.URL); err != nil || ok {
		return ch, err
	}
	return ch, tx.put(KindCharm, m.UUID, ch.URL, &charmDoc{Model: m.UUID, Charm: ch}, watcher.FieldCreated)
}
