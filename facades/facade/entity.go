package facade

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/watcher"
)

// EntityLimits bounds what one entity may hold across all its connections
// (unbounded, one machine agent's 150 connections with 1,000 watchers each
// took 690 MB of the daemon): its open connections and its watchers. The entities are
// machine agents (a machine of one model) and users that are not
// superusers; the controller agent and superusers, who hold the
// controller's keys anyway, are not counted. Safe for concurrent use.
type EntityLimits struct {
	maxConns, maxWatchers int

	mu sync.Mutex // guards m
	m  map[string]*entityCount

	retired atomic.Bool // connections given back are not counted (Retire)
}

type entityCount struct {
	conns    int
	watchers *watcher.Quota
}

// NewEntityLimits returns limits of maxConns connections and maxWatchers
// watchers per entity; 0 is no limit.
func NewEntityLimits(maxConns, maxWatchers int) *EntityLimits {
	return &EntityLimits{maxConns: maxConns, maxWatchers: maxWatchers, m: make(map[string]*entityCount)}
}

// tooManyConns refuses a login over the entity's connection limit.
func tooManyConns(name string, limit int) error {
	return &params.Error{
		Message: fmt.Sprintf("too many connections for %s (limit %d)", name, limit),
		Code:    params.CodeQuotaLimitExceeded,
	}
}

// admit counts a new connection of the entity key (named name in errors):
// it returns the entity's shared watcher quota (nil: no limit) and the
// function that gives the connection back, or the error over the limit.
func (l *EntityLimits) admit(key, name string) (*watcher.Quota, func(), error) {
	if l == nil {
		return nil, func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil {
		e = &entityCount{}
		if l.maxWatchers > 0 {
			e.watchers = watcher.NewQuota(l.maxWatchers, "for "+name+" across its connections")
		}
		l.m[key] = e
	}
	if l.maxConns > 0 && e.conns >= l.maxConns {
		if e.conns == 0 {
			delete(l.m, key)
		}
		return nil, nil, tooManyConns(name, l.maxConns)
	}
	e.conns++
	var once sync.Once
	return e.watchers, func() {
		if l.retired.Load() {
			return
		}
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if e.conns--; e.conns == 0 {
				delete(l.m, key)
			}
		})
	}, nil
}

// Retire stops counting connections given back: a stopping daemon retires
// its limits as it ends every connection at once, so that their ends do
// not queue on the lock for counts the process's end drops. Admission
// goes on as before (the daemon admits no login by then).
func (l *EntityLimits) Retire() {
	if l != nil {
		l.retired.Store(true)
	}
}

// Conns returns the open connections counted for the entity key (for
// tests).
func (l *EntityLimits) Conns(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key]; e != nil {
		return e.conns
	}
	return 0
}

// EntityKey is the key of an entity in EntityLimits: a machine is one of
// a model, a user is the controller's.
func EntityKey(a Auth) (key string, counted bool) {
	switch {
	case a.Controller, a.IsSuperuser():
		return "", false
	case a.Machine != nil:
		return "machine:" + a.Machine.Model + "/" + a.Machine.ID, true
	case a.User != nil:
		return "user:" + a.User.Name, true
	}
	return "", false
}
