package store_test

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// TestHistoryRecordGolden: the bytes of a history record as both engines
// persist them (bbolt's meta/history, etcd's feed key) decode to what was
// written, and stay the bytes written before: the format is on disk.
func TestHistoryRecordGolden(t *testing.T) {
	at := time.Unix(1_700_000_000, 5).UTC()
	o := store.Origin{Who: "user-admin", Addr: "192.0.2.1:5", Daemon: "d0", Call: "Provisioner.SetStatus"}
	b := store.AppendCommitHead(nil, at, o)
	b = store.AppendWrite(b, "machine/m/0", []byte(`{"a":1,"s":"x"}`), true, []byte(`{"a":1,"s":"y","n":null}`), true)
	b = store.AppendWrite(b, "raw/k", nil, false, []byte("v"), true)
	b = store.AppendWrite(b, "raw/gone", []byte("old"), true, nil, false)
	b = store.AppendWrite(b, "raw/same", []byte("v"), true, []byte("v"), true) // nothing changed: nothing kept
	b = store.AppendWrite(b, "raw/r", []byte("[1]"), true, []byte("[2]"), true)
	// version 1, time, origin; machine/m/0 patched: 2 members, "s" before
	// and after, "n" absent before; raw/k created; raw/gone removed;
	// raw/r replaced.
	const golden = "01" + "8580a8b1e39fe7cb17" + "0a757365722d61646d696e" + "0b3139322e302e322e313a35" + "026430" +
		"1550726f766973696f6e65722e536574537461747573" +
		"0b6d616368696e652f6d2f30" + "04" + "02" + "0173" + "04227822" + "04227922" + "016e" + "00" + "056e756c6c" +
		"057261772f6b" + "01" + "0176" +
		"087261772f676f6e65" + "02" + "036f6c64" +
		"057261772f72" + "03" + "035b315d" + "035b325d"
	if got := hex.EncodeToString(b); got != golden {
		t.Errorf("record bytes changed:\n got %s\nwant %s", got, golden)
	}
	c, err := store.DecodeCommit(7, b)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Commit{Rev: 7, Time: at, Origin: o, Writes: []store.Write{
		{Key: "machine/m/0", Op: store.Patched, Members: []store.MemberChange{
			{Name: "s", Before: []byte(`"x"`), After: []byte(`"y"`)},
			{Name: "n", After: []byte(`null`)},
		}},
		{Key: "raw/k", Op: store.Created, After: []byte("v")},
		{Key: "raw/gone", Op: store.Removed, Before: []byte("old")},
		{Key: "raw/r", Op: store.Replaced, Before: []byte("[1]"), After: []byte("[2]")},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("decoded:\n got %+v\nwant %+v", c, want)
	}
	if tm, err := store.CommitTime(b); err != nil || !tm.Equal(at) {
		t.Errorf("CommitTime = %v, %v", tm, err)
	}
	// EncodeCommit gives the bytes back (a migration carries records so),
	// and with an elided write too; ElideCommit keeps the keys only.
	if got := store.EncodeCommit(c); !bytes.Equal(got, b) {
		t.Errorf("EncodeCommit:\n got %x\nwant %x", got, b)
	}
	withElided := store.AppendElided(bytes.Clone(b), "raw/big")
	if d, err := store.DecodeCommit(7, withElided); err != nil || !bytes.Equal(store.EncodeCommit(d), withElided) {
		t.Errorf("EncodeCommit of a record with an elided write: %v", err)
	}
	e, err := store.DecodeCommit(7, store.ElideCommit(c))
	if err != nil || len(e.Writes) != 4 || e.Writes[3].Key != "raw/r" || e.Writes[3].Op != store.Elided || e.Origin != o || !e.Time.Equal(at) {
		t.Errorf("ElideCommit: %+v, %v", e, err)
	}
	// Every truncation of the record is refused or decodes; none panics.
	for i := range len(b) {
		_, _ = store.DecodeCommit(1, b[:i])
	}
	for _, bad := range []string{"", "02", "01", "01ff"} {
		raw, _ := hex.DecodeString(bad)
		if _, err := store.DecodeCommit(1, raw); err == nil {
			t.Errorf("DecodeCommit(%s) succeeded", bad)
		}
	}
}

// TestHistoryNotPlainObjects: values that are not JSON objects read
// plainly (escaped or repeated names, arrays, broken bytes) are kept
// whole.
func TestHistoryNotPlainObjects(t *testing.T) {
	for _, v := range []string{`{"a\"b":1}`, `{"a":1,"a":2}`, `[1]`, `{"a":`, `{"a":1}x`, `{"a" 1}`, `{"a":"1}`} {
		b := store.AppendWrite(store.AppendCommitHead(nil, time.Unix(0, 0), store.Origin{}), "k/1", []byte(v), true, []byte(`{"a":3}`), true)
		c, err := store.DecodeCommit(1, b)
		if err != nil || len(c.Writes) != 1 || c.Writes[0].Op != store.Replaced || string(c.Writes[0].Before) != v {
			t.Errorf("%s: %+v, %v", v, c, err)
		}
	}
}

// TestParseRetention: what operators write, and the bad values refused
// with the reason.
func TestParseRetention(t *testing.T) {
	for in, want := range map[string]store.Retention{
		"7d":           {Age: 7 * 24 * time.Hour},
		"36h":          {Age: 36 * time.Hour},
		"500000":       {Revisions: 500000},
		"7d,500000":    {Age: 7 * 24 * time.Hour, Revisions: 500000},
		" 90m , 1000 ": {Age: 90 * time.Minute, Revisions: 1000},
	} {
		got, err := store.ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := store.ParseRetention(got.String()); err != nil || again != got {
			t.Errorf("ParseRetention(%q) = %+v, %v", got.String(), again, err)
		}
	}
	for in, why := range map[string]string{
		"":        "an empty item",
		"0":       "at least 1",
		"10s":     "one minute at least",
		"7d,8d":   "two durations",
		"5,6":     "two numbers",
		"forever": "one minute at least",
		"-1h":     "one minute at least",
	} {
		if _, err := store.ParseRetention(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseRetention(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

// TestHistoryElided: a write whose values were too large to keep is
// recorded by its key alone.
func TestHistoryElided(t *testing.T) {
	b := store.AppendElided(store.AppendCommitHead(nil, time.Unix(0, 0), store.Origin{}), "machine/big")
	c, err := store.DecodeCommit(3, b)
	if err != nil || len(c.Writes) != 1 || c.Writes[0].Key != "machine/big" || c.Writes[0].Op != store.Elided {
		t.Errorf("%+v, %v", c, err)
	}
}
