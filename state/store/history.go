package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/provisiond/provisiond/internal/jsonscan"
)

// The history of commits: what each commit wrote (every key, its value
// before and after, or for a JSON object only the top-level members that
// changed), when and on whose behalf. Both engines write a commit's
// history record in the commit's own transaction (bbolt in its bucket
// "meta/history", etcd beside the change set on its feed key) with the
// codec below, written once here. docs/history.md describes the design.

// Origin says on whose behalf a commit was made: the user or agent logged
// in (its tag), the address it called from, the daemon that served it and
// the call (Facade.Method). The facade layer puts it on the context of
// each call (OriginKey); Update reads it from the context it is given. A
// commit made by the daemon itself (a worker, start-up) has a zero Origin
// but for Daemon when that is known.
type Origin struct {
	Who, Addr, Daemon, Call string
}

// OriginKey is the context key under which a call's Origin is found:
// ctx.Value(OriginKey{}) returns an Origin. It is exported so that the
// layer that makes a call's context can answer it from its own Value
// without wrapping the context once more.
type OriginKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, OriginKey{}, o)
}

// OriginOf returns the Origin ctx carries (zero: none).
func OriginOf(ctx context.Context) Origin {
	o, _ := ctx.Value(OriginKey{}).(Origin)
	return o
}

// WriteOp is how a commit changed one key.
type WriteOp byte

const (
	// Created: the key did not exist; After is its value.
	Created WriteOp = 1
	// Removed: the key existed and was deleted; Before is its value.
	Removed WriteOp = 2
	// Replaced: the value changed and is kept whole, Before and After.
	Replaced WriteOp = 3
	// Patched: both values are JSON objects, and Members holds the
	// top-level members that differ.
	Patched WriteOp = 4
	// Elided: the key was written, but what the write did was too large
	// to keep beside it (etcd: the record would take the transaction past
	// etcd's request limit).
	Elided WriteOp = 5
)

// Write is what a commit did to one key.
type Write struct {
	Key           string
	Op            WriteOp
	Before, After []byte         // Created: After; Removed: Before; Replaced: both
	Members       []MemberChange // Patched
}

// MemberChange is a top-level member of a JSON object that a commit changed: its
// name and its value (JSON) before and after; nil when it was, or is, not
// there.
type MemberChange struct {
	Name          string
	Before, After []byte
}

// Commit is the history record of one commit.
type Commit struct {
	Rev    uint64
	Time   time.Time
	Origin Origin
	Writes []Write
}

// Historian is implemented by stores that keep the history of commits.
type Historian interface {
	// History calls fn with the history records of the commits after
	// revision after, in revision order, at most limit of them (limit <=
	// 0 or over MaxScan: MaxScan, counted in revisions). It returns the
	// revision of the last one visited (after, when none) and whether
	// more follow. A record pruned, or a revision without a commit of
	// this store, is skipped. On etcd one revision may have several
	// records (a group commit: one per function, each with its origin).
	// When records after after were lost (etcd: compacted away before
	// they were archived), so the history after it is not whole, it
	// fails with ErrHistoryGone rather than skip them; after 0 reads
	// from the oldest point the history is whole after.
	History(ctx context.Context, after uint64, limit int, fn func(Commit) error) (last uint64, more bool, err error)

	// HistoryStats reports what is kept now.
	HistoryStats(ctx context.Context) (HistoryStats, error)
}

// RecentHistorian is implemented by stores that keep in memory the
// history records of the revisions their process applied last (etcd: as
// its feed brought them), so that a resumed watch reads the newest ones
// without a read of the store.
type RecentHistorian interface {
	// RecentHistory calls fn with the history records of the commits in
	// (after, upto], in revision order, as History would, and reports
	// true, when it holds every revision of that range (upto at most the
	// revision the process has applied); otherwise it calls fn with none
	// and reports false.
	RecentHistory(ctx context.Context, after, upto uint64, fn func(Commit) error) (bool, error)
}

// ErrHistoryGone is returned by Historian.History asked to read after a
// revision whose following records are not all kept: some between it and
// the oldest point kept were lost (on etcd, compacted away before they
// were archived). HistoryStats names the oldest point kept.
var ErrHistoryGone = errors.New("the history after the revision is no longer all kept")

// HistoryStats describes the history a store keeps.
type HistoryStats struct {
	// Oldest is the oldest revision whose record is kept, OldestTime its
	// time (zero: none kept). On etcd, after records were lost, it is the
	// oldest after them: the history from it on is whole.
	Oldest     uint64
	OldestTime time.Time
	// Records is how many records are kept and Bytes their size, where
	// the engine knows (0: unknown).
	Records, Bytes int64
}

// Retention is how much history is kept: the records younger than Age
// and among the newest Revisions revisions; a zero field sets no limit of
// its kind. The zero Retention keeps everything.
type Retention struct {
	Age       time.Duration
	Revisions uint64
}

// Prunes reports whether the record of revision rev, made at t, falls
// outside r at revision now and time at.
func (r Retention) Prunes(rev uint64, t time.Time, now uint64, at time.Time) bool {
	return r.Revisions > 0 && now >= r.Revisions && rev <= now-r.Revisions ||
		r.Age > 0 && at.Sub(t) > r.Age
}

// ErrBadHistory is returned by DecodeCommit for bytes that are not a
// history record.
var ErrBadHistory = errors.New("malformed history record")

// historyVersion is the first byte of a history record.
const historyVersion = 1

// AppendCommitHead appends the head of a history record: its version, the
// commit's time (Unix nanoseconds) and origin. The commit's writes follow,
// each appended by AppendWrite; the revision is kept beside the record
// (bbolt's key, etcd's mod revision), not in it.
func AppendCommitHead(b []byte, t time.Time, o Origin) []byte {
	b = append(b, historyVersion)
	b = binary.AppendUvarint(b, uint64(t.UnixNano()))
	for _, s := range [...]string{o.Who, o.Addr, o.Daemon, o.Call} {
		b = appendString(b, s)
	}
	return b
}

// AppendWrite appends to a history record what writing key did: before is
// its value before (had: it existed), after its value after (has: it
// exists). A write that changed nothing (the same bytes put again) appends
// nothing. Two JSON objects are kept as the members that differ, when they
// can be read plainly (no escaped or repeated member names); other values
// whole.
func AppendWrite(b []byte, key string, before []byte, had bool, after []byte, has bool) []byte {
	switch {
	case !had && !has:
		return b
	case !had:
		b = appendString(b, key)
		b = append(b, byte(Created))
		return appendBytes(b, after)
	case !has:
		b = appendString(b, key)
		b = append(b, byte(Removed))
		return appendBytes(b, before)
	case string(before) == string(after):
		return b
	}
	var bufB, bufA [32]span
	mb, okB := objectMembers(before, bufB[:0])
	ma, okA := objectMembers(after, bufA[:0])
	if !okB || !okA {
		b = appendString(b, key)
		b = append(b, byte(Replaced))
		b = appendBytes(b, before)
		return appendBytes(b, after)
	}
	b = appendString(b, key)
	b = append(b, byte(Patched))
	n := 0
	for _, a := range ma {
		if i := find(mb, a.name); i < 0 || string(before[mb[i].v0:mb[i].v1]) != string(after[a.v0:a.v1]) {
			n++
		}
	}
	for _, m := range mb {
		if find(ma, m.name) < 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, a := range ma {
		name, val := a.name, after[a.v0:a.v1]
		i := find(mb, name)
		if i >= 0 && string(before[mb[i].v0:mb[i].v1]) == string(val) {
			continue
		}
		b = appendString(b, string(name))
		if i < 0 {
			b = append(b, 0)
		} else {
			b = appendOptional(b, before[mb[i].v0:mb[i].v1])
		}
		b = appendOptional(b, val)
	}
	for _, m := range mb {
		if find(ma, m.name) < 0 {
			b = appendString(b, string(m.name))
			b = appendOptional(b, before[m.v0:m.v1])
			b = append(b, 0)
		}
	}
	return b
}

// EncodeCommit encodes a history record as the engines store it (without
// its revision, kept beside it): DecodeCommit's inverse, byte for byte,
// for a record DecodeCommit returned. A migration carries another
// store's records with it.
func EncodeCommit(c Commit) []byte {
	b := AppendCommitHead(nil, c.Time, c.Origin)
	for _, w := range c.Writes {
		b = appendString(b, w.Key)
		b = append(b, byte(w.Op))
		switch w.Op {
		case Created:
			b = appendBytes(b, w.After)
		case Removed:
			b = appendBytes(b, w.Before)
		case Replaced:
			b = appendBytes(b, w.Before)
			b = appendBytes(b, w.After)
		case Patched:
			b = binary.AppendUvarint(b, uint64(len(w.Members)))
			for _, m := range w.Members {
				b = appendString(b, m.Name)
				b = appendOptional(b, m.Before)
				b = appendOptional(b, m.After)
			}
		}
	}
	return b
}

// ElideCommit encodes c keeping only which keys it wrote (each Elided),
// as etcd keeps a commit whose record would take its transaction past
// etcd's request limit.
func ElideCommit(c Commit) []byte {
	b := AppendCommitHead(nil, c.Time, c.Origin)
	for _, w := range c.Writes {
		b = AppendElided(b, w.Key)
	}
	return b
}

// HistoryLoader is implemented by stores that can take another store's
// history of commits when they are filled by a Load (a migration's
// target, a backup of a store on etcd): the records keep their revisions,
// and the store's own revisions continue after them, so the history reads
// on across the copy (provisionctl history prints the same revisions,
// status --at rebuilds a point before it, a watch resumes from one).
type HistoryLoader interface {
	// LoadHistory stores the records next returns (each with its
	// revision, in revision order; on etcd several may share one), until
	// it returns io.EOF, and moves the store on so that the Load's
	// records and every later commit are numbered after through (the
	// revision the Load's records are the source's state at, at least
	// the newest record's). It refuses a store holding history. On etcd
	// a revision whose records would take a transaction past etcd's
	// request limit keeps them as ElideCommit does. bbolt
	// takes it before or after Load; etcd only before (its revisions are
	// the cluster's, and the Load's must come after the records').
	LoadHistory(ctx context.Context, through uint64, next func() (rev uint64, rec []byte, err error)) (n int, err error)
}

// AppendElided appends to a history record that key was written, without
// what the write did (Elided).
func AppendElided(b []byte, key string) []byte {
	b = appendString(b, key)
	return append(b, byte(Elided))
}

// DecodeCommit decodes a history record (the whole of b) of revision rev.
// The record shares no memory with b.
func DecodeCommit(rev uint64, b []byte) (Commit, error) {
	d := decoder{b: b, ok: true}
	if len(b) == 0 || b[0] != historyVersion {
		return Commit{}, ErrBadHistory
	}
	d.b = d.b[1:]
	c := Commit{Rev: rev}
	ns, ok := d.num()
	if !ok {
		return Commit{}, ErrBadHistory
	}
	c.Time = time.Unix(0, int64(ns)).UTC()
	c.Origin.Who, c.Origin.Addr, c.Origin.Daemon, c.Origin.Call = d.str(), d.str(), d.str(), d.str()
	for d.ok && len(d.b) > 0 {
		w := Write{Key: d.str()}
		if !d.ok || len(d.b) == 0 {
			return Commit{}, ErrBadHistory
		}
		w.Op = WriteOp(d.b[0])
		d.b = d.b[1:]
		switch w.Op {
		case Created:
			w.After = d.bytes()
		case Removed:
			w.Before = d.bytes()
		case Replaced:
			w.Before, w.After = d.bytes(), d.bytes()
		case Elided:
		case Patched:
			n, ok := d.num()
			if !ok || n > uint64(len(d.b)) { // a member takes 3 bytes at least
				return Commit{}, ErrBadHistory
			}
			w.Members = make([]MemberChange, n)
			for i := range w.Members {
				w.Members[i] = MemberChange{Name: d.str(), Before: d.optional(), After: d.optional()}
			}
		default:
			return Commit{}, ErrBadHistory
		}
		c.Writes = append(c.Writes, w)
	}
	if !d.ok {
		return Commit{}, ErrBadHistory
	}
	return c, nil
}

// CommitTime returns the time of a history record without decoding the
// rest (pruning by age reads only this).
func CommitTime(b []byte) (time.Time, error) {
	if len(b) == 0 || b[0] != historyVersion {
		return time.Time{}, ErrBadHistory
	}
	ns, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return time.Time{}, ErrBadHistory
	}
	return time.Unix(0, int64(ns)).UTC(), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendOptional appends v, which may be absent (nil): its length plus
// one, or 0.
func appendOptional(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v))+1)
	return append(b, v...)
}

// decoder reads a history record; ok turns false at the first bad field
// and stays so.
type decoder struct {
	b  []byte
	ok bool
}

func (d *decoder) num() (uint64, bool) {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok = false
		return 0, false
	}
	d.b = d.b[n:]
	return v, true
}

func (d *decoder) take(l uint64) []byte {
	if l > uint64(len(d.b)) {
		d.ok = false
		return nil
	}
	v := append([]byte{}, d.b[:l]...)
	d.b = d.b[l:]
	return v
}

func (d *decoder) bytes() []byte {
	l, ok := d.num()
	if !ok {
		return nil
	}
	return d.take(l)
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) optional() []byte {
	l, ok := d.num()
	if !ok || l == 0 {
		return nil
	}
	return d.take(l - 1)
}

// span is where one member of a JSON object is: its name (without the
// quotes) and its value.
type span struct {
	name   []byte
	v0, v1 int
}

// find returns the index of the member named name in ms, -1
// if there is none.
func find(ms []span, name []byte) int {
	for i, m := range ms {
		if string(m.name) == string(name) {
			return i
		}
	}
	return -1
}

// objectMembers splits a JSON object into its top-level members
// (jsonscan.Members), and also reports false for a name twice.
func objectMembers(raw []byte, ms []span) ([]span, bool) {
	ok := jsonscan.Members(raw, func(name []byte, v0, v1 int) bool {
		if find(ms, name) >= 0 {
			return false
		}
		ms = append(ms, span{name, v0, v1})
		return true
	})
	return ms, ok
}

// DefaultRetention is the history kept unless the operator says otherwise:
// seven days.
var DefaultRetention = Retention{Age: 7 * 24 * time.Hour}

// ParseRetention reads a retention as operators write it: a
// comma-separated list of a duration ("7d", "36h", "90m") and a number of
// revisions ("500000"), either or both.
func ParseRetention(s string) (Retention, error) {
	var r Retention
	bad := func(why string) (Retention, error) {
		return Retention{}, fmt.Errorf("history retention %q: %s: want a duration (7d, 36h) and/or a number of revisions (500000), comma-separated", s, why)
	}
	items := strings.Split(s, ",")
	for _, item := range items {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			return bad("an empty item")
		case strings.Trim(item, "0123456789") == "":
			if r.Revisions != 0 {
				return bad("two numbers of revisions")
			}
			n, err := strconv.ParseUint(item, 10, 64)
			if err != nil || n == 0 {
				return bad("the number of revisions must be at least 1")
			}
			r.Revisions = n
		default:
			if r.Age != 0 {
				return bad("two durations")
			}
			var d time.Duration
			var err error
			if days, ok := strings.CutSuffix(item, "d"); ok && strings.Trim(days, "0123456789") == "" && days != "" {
				n, perr := strconv.ParseUint(days, 10, 16)
				d, err = time.Duration(n)*24*time.Hour, perr
			} else {
				d, err = time.ParseDuration(item)
			}
			if err != nil || d < time.Minute {
				return bad("the duration must be one minute at least")
			}
			r.Age = d
		}
	}
	return r, nil
}

// String writes r as ParseRetention reads it ("" for the zero Retention).
func (r Retention) String() string {
	var items []string
	if r.Age > 0 {
		if r.Age%(24*time.Hour) == 0 {
			items = append(items, strconv.FormatInt(int64(r.Age/(24*time.Hour)), 10)+"d")
		} else {
			items = append(items, r.Age.String())
		}
	}
	if r.Revisions > 0 {
		items = append(items, strconv.FormatUint(r.Revisions, 10))
	}
	return strings.Join(items, ",")
}
