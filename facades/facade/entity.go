package facade

import (
	"fmt"
	"hash/maphash"
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

	// The entities' counts, in entityShards shards by key, each with its
	// own lock: every connection's end takes its entity's, and when a
	// daemon with 14,000 connections stops they end at once (on one lock,
	// 7,415 of them were queued in a stopping daemon's stacks).
	seed   maphash.Seed
	shards [entityShards]entityShard

	retired atomic.Bool // connections given back are not counted (Retire)
}

// entityShards is how many shards EntityLimits' counts are in.
const entityShards = 64

type entityShard struct {
	mu sync.Mutex // guards m
	m  map[string]*entityCount
	_  [64 - 16]byte
}

// shard returns the shard of entity key.
func (l *EntityLimits) shard(key string) *entityShard {
	return &l.shards[maphash.String(l.seed, key)%entityShards]
}

type entityCount struct {
	conns    int
	watchers *watcher.Quota
}

// NewEntityLimits returns limits of maxConns connections and maxWatchers
// watchers per entity; 0 is no limit.
func NewEntityLimits(maxConns, maxWatchers int) *EntityLimits {
	l := &EntityLimits{maxConns: maxConns, maxWatchers: maxWatchers, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*entityCount)
	}
	return l
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
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[key]
	if e == nil {
		e = &entityCount{}
		if l.maxWatchers > 0 {
			e.watchers = watcher.NewQuota(l.maxWatchers, "for "+name+" across its connections")
		}
		sh.m[key] = e
	}
	if l.maxConns > 0 && e.conns >= l.maxConns {
		if e.conns == 0 {
			delete(sh.m, key)
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
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if e.conns--; e.conns == 0 {
				delete(sh.m, key)
			}
		})
	}, nil
}

// Retire stops counting connections given back: a stopping daemon retires
// its limits as it ends every connection at once, so that their ends do
// not queue on the shards' locks for counts the process's end drops.
// Admission goes on as before (the daemon admits no login by then).
func (l *EntityLimits) Retire() {
	if l != nil {
		l.retired.Store(true)
	}
}

// Conns returns the open connections counted for the entity key (for
// tests).
func (l *EntityLimits) Conns(key string) int {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[key]; e != nil {
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
