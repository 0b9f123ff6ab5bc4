package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// A damaged database must be reported, never crash the command reading it.
// bbolt trusts its pages: a flipped byte in a used page makes it fail an
// assertion, index out of range or fault on the memory map, and its own
// Check (and the free page scan of every read-write open, as the daemon's
// NoFreelistSync needs) walks the pages on goroutines of its own, where no
// recover reaches. So check reads a database in a child process (this
// binary again, the hidden verb internal-check) and reports a child that
// crashed as a damaged file, with the crash's first line; serve runs the
// same check before it opens the database, and refuses a damaged one
// instead of dying in bbolt (or later, on a page it had not read yet).
//
// Before bbolt reads the file the child checks its two meta pages itself
// (bbolt keeps two copies, written alternately, and opens with the newer
// valid one): one damaged copy is what repair fixes, by committing one
// empty transaction through bbolt, which writes the damaged copy again.

// childEnv marks the child's environment, so a test binary (whose
// TestMain runs the command line it is given) can stand in for provisiond.
const childEnv = "PROVISIOND_INTERNAL_CHILD"

// internalCheckCommand is the child: it prints the checkReport of the
// database at its argument as JSON, and exits 0 unless it crashed. With
// --rewrite-meta it first opens the database read-write and closes it
// (one commit, which writes bbolt's older meta page copy again).
func internalCheckCommand(e sys) *cobra.Command {
	var rewrite bool
	cmd := &cobra.Command{
		Use:    "internal-check DB",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if rewrite {
				if err := rewriteMeta(args[0]); err != nil {
					return json.NewEncoder(e.stdout).Encode(checkReport{Path: args[0], Error: err.Error()})
				}
			}
			return json.NewEncoder(e.stdout).Encode(checkPages(args[0]))
		},
	}
	cmd.Flags().BoolVar(&rewrite, "rewrite-meta", false, "")
	return cmd
}

// rewriteMeta commits through bbolt until both meta pages are valid: each
// commit writes the copy of its transaction's parity, so one or two do
// (two when the damaged copy is the newer one, its header alone damaged).
func rewriteMeta(path string) error {
	for range 2 {
		s, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			return err
		}
		if err := s.Close(); err != nil {
			return err
		}
		metas, err := readMetas(path)
		if err != nil {
			return err
		}
		if metas[0].problem == "" && metas[1].problem == "" {
			return nil
		}
	}
	return nil // checkPages says what is left
}

// checkInChild runs the check of the database at path in a child process
// (after rewriting its meta page, with "--rewrite-meta").
func checkInChild(ctx context.Context, path string, flags ...string) checkReport {
	rep := checkReport{Path: path}
	self, err := os.Executable()
	if err != nil {
		rep.Error = fmt.Sprintf("cannot find this program to check the database with: %v", err)
		return rep
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"internal-check", path}, flags...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if runErr == nil {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err == nil {
			return rep
		}
	}
	if ctx.Err() != nil {
		rep.Error = "the check was interrupted"
		return rep
	}
	rep.Damaged = true
	rep.Error = "the database is damaged: bbolt crashed reading it (" + crashLine(stderr.String(), runErr) + ")"
	return rep
}

// crashLine is the first line of a Go crash (its panic or fatal error,
// without the stack and its source locations).
func crashLine(stderr string, err error) string {
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		for _, p := range []string{"panic: ", "fatal error: "} {
			if rest, ok := strings.CutPrefix(line, p); ok {
				return rest
			}
		}
	}
	if err != nil {
		return err.Error()
	}
	return "no report"
}

// checkPages is the child's check: the meta pages, then bbolt's.
func checkPages(path string) checkReport {
	rep := checkReport{Path: path}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		rep.Error = fmt.Sprintf("no database at %s: is --data-dir (or $PROVISIOND_DATA_DIR) right?", path)
		return rep
	}
	metas, err := readMetas(path)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	good, bad := -1, -1
	for i, m := range metas {
		if m.problem == "" {
			if good < 0 || m.txid > metas[good].txid {
				good = i
			}
		} else {
			bad = i
		}
	}
	if good < 0 {
		rep.Damaged = true
		rep.Error = fmt.Sprintf("the database is damaged: both meta pages (page 0: %s; page 1: %s), so bbolt cannot open it", metas[0].problem, metas[1].problem)
		return rep
	}
	var metaErr string
	if bad >= 0 {
		rep.Damaged, rep.DamagedMetaPage = true, &bad
		metaErr = fmt.Sprintf("the database is damaged: meta page %d: %s; the other copy is valid (transaction %d); provisiond repair rewrites the damaged one", bad, metas[bad].problem, metas[good].txid)
		if !metas[bad].headerIntact {
			// bbolt's Check asserts the page's id and type first.
			rep.Error = metaErr + "; the other pages were not checked (repair first)"
			return rep
		}
	}
	// The free page scan at open walks every page reachable on this
	// goroutine, so a page bbolt crashes on crashes it here, before
	// anything is printed, and not on Check's goroutine, whose panic would
	// close Check's channel first (Check returning nil: "ok" raced the
	// crash; 9 of 600 checks of a damaged page exited 0 under load).
	db, err := boltstore.OpenReadOnly(path, boltstore.Options{InitialMmapSize: boltstore.MmapSize, PreloadFreelist: true})
	if err != nil {
		rep.Error = "opening state: " + err.Error()
		return rep
	}
	st, err := state.OpenReadOnly(db)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	defer st.Close()
	stats, err := st.Stats(context.Background())
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.SchemaVersion, rep.Revision, rep.Size, rep.Records = stats.SchemaVersion, stats.Revision, stats.SizeBytes, stats.Records
	if err := db.Check(); err != nil {
		rep.Damaged = true
		rep.DamagedMetaPage = nil
		rep.Error = "the database is damaged: " + err.Error()
		if metaErr != "" {
			rep.Error += "; and " + strings.TrimPrefix(metaErr, "the database is damaged: ")
		}
		return rep
	}
	rep.PagesChecked = true
	if metaErr != "" {
		rep.Error = metaErr
		return rep
	}
	rep.OK = true
	return rep
}

// meta is what readMetas found in one of bbolt's meta pages.
type meta struct {
	problem      string // "" for a valid page
	headerIntact bool   // the page header's id and type are right
	txid         uint64
}

// bbolt's file format (go.etcd.io/bbolt/internal/common: page.go, meta.go):
// a page is a 16-byte header (id uint64, flags uint16, count uint16,
// overflow uint32) and a body; a meta page's body is magic, version,
// page size, flags (uint32 each), the root bucket (root, sequence), the
// freelist, pgid and txid (uint64 each) and an FNV-64a checksum of the
// body before it. Both in the machine's byte order (little endian on
// every platform provisiond is built for).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltMetaFlag     = 0x04
	pageHeaderSize   = 16
	metaChecksumFrom = pageHeaderSize + 56
)

// readMetas reads and validates the file's two meta pages. Page 1 sits at
// the page size recorded in page 0, or (page 0 damaged) at the first
// common page size where a valid meta page is found.
func readMetas(path string) ([2]meta, error) {
	var out [2]meta
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer f.Close()
	read := func(off int64) []byte {
		b := make([]byte, metaChecksumFrom+8)
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return nil
		}
		return b
	}
	b0 := read(0)
	if b0 == nil {
		return out, fmt.Errorf("cannot read %s", path)
	}
	out[0] = validMeta(b0, 0)
	sizes := []int64{4096, 8192, 16384, 32768, 65536}
	if out[0].problem == "" {
		sizes = []int64{int64(binary.LittleEndian.Uint32(b0[pageHeaderSize+8:]))}
	}
	out[1] = meta{problem: "not found at any page size"}
	for _, size := range sizes {
		if b1 := read(size); b1 != nil {
			if m := validMeta(b1, 1); m.problem == "" || len(sizes) == 1 {
				out[1] = m
				break
			}
		}
	}
	return out, nil
}

func validMeta(b []byte, id uint64) meta {
	le := binary.LittleEndian
	m := meta{headerIntact: le.Uint64(b[0:]) == id && le.Uint16(b[8:]) == boltMetaFlag}
	body := b[pageHeaderSize:]
	m.txid = le.Uint64(body[48:])
	h := fnv.New64a()
	h.Write(b[pageHeaderSize:metaChecksumFrom])
	switch {
	case le.Uint32(body[0:]) != boltMagic:
		m.problem = "not a bbolt meta page: wrong magic number"
	case le.Uint32(body[4:]) != boltVersion:
		m.problem = fmt.Sprintf("bbolt format version %d, want %d", le.Uint32(body[4:]), boltVersion)
	case h.Sum64() != le.Uint64(b[metaChecksumFrom:]):
		m.problem = "checksum mismatch"
	case !m.headerIntact:
		m.problem = "page header damaged"
	}
	return m
}
