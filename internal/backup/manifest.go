package backup

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/migrate"
)

// Every backup archive carries a manifest (docs/reliability.md, Backup
// integrity): its first entry, ManifestFile, lists each file of the
// archive with its size and SHA-256 and records the state the database
// holds (its schema versions, revision and record counts per kind); its
// last entry, ManifestDigestFile, is the SHA-256 of the manifest. Restore
// and check verify all of it before anything is used: a changed byte in
// the database, the small files, the manifest or its digest, a file
// missing or added, and an archive cut short are each refused with a
// message. The database's own revision and counts are compared with the
// manifest's once it opens.
//
// The digests detect damage and edits made without rewriting the
// manifest; they are not a signature: whoever can write a plain archive
// can write a consistent one. An archive encrypted with age (backup
// --encrypt or --recipient) is authenticated as well: changing any byte
// without its key fails the decryption.
//
// An archive without a manifest (made by an earlier provisiond) is refused
// unless the operator passes --allow-unverified: otherwise removing the
// manifest would be a way around it.

const (
	// ManifestFile is the first entry of a backup archive.
	ManifestFile = "manifest.json"
	// ManifestDigestFile is the last: the SHA-256 of ManifestFile, in hex.
	ManifestDigestFile = "manifest.json.sha256"
	// ManifestFormat names this layout of archive and manifest.
	ManifestFormat = "provisiond-backup/1"
	// maxManifest bounds the manifest an archive may carry.
	maxManifest = 1 << 20
)

// Manifest describes a backup archive: what it holds and the state its
// database records.
type Manifest struct {
	Format  string    `json:"format"`
	Created time.Time `json:"created"`
	// Version is the provisiond that made the archive.
	Version string `json:"provisiond-version"`
	// Controller is the controller's UUID; Store the store the daemon ran
	// on (bbolt or etcd: either makes the same archive).
	Controller string `json:"controller-uuid"`
	Store      string `json:"store"`
	// SchemaVersion (the store's layout), StateSchemaVersion, Revision and
	// Records (keys per kind) are the archived database's, as check
	// reports them.
	SchemaVersion      uint64         `json:"schema-version"`
	StateSchemaVersion int            `json:"state-schema-version"`
	Revision           uint64         `json:"revision"`
	Records            map[string]int `json:"records"`
	// Files are the archive's other entries, in their order.
	Files []ManifestEntry `json:"files"`
}

// ManifestEntry is one file of an archive.
type ManifestEntry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// backupManifest makes the manifest of an archive of small and the
// database snapshot db (at its start, size bytes; left at its start).
func (h *Handler) backupManifest(small []tarEntry, db *os.File, size int64) ([]byte, error) {
	m := Manifest{Format: ManifestFormat, Created: time.Now().UTC().Truncate(time.Second), Version: buildinfo.Version,
		Controller: h.cfg.Controller, Store: h.cfg.State.Store().Info().Engine}
	if m.Store == "" {
		m.Store = controllerstore.StoreBolt
	}
	for _, e := range small {
		m.Files = append(m.Files, ManifestEntry{Name: e.name, Size: int64(len(e.data)), SHA256: sha256Hex(e.data)})
	}
	sum := sha256.New()
	if n, err := io.Copy(sum, db); err != nil || n != size {
		return nil, fmt.Errorf("reading the snapshot: %d of %d bytes: %v", n, size, err)
	}
	if _, err := db.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	m.Files = append(m.Files, ManifestEntry{Name: controllerstore.DBFile, Size: size, SHA256: hex.EncodeToString(sum.Sum(nil))})
	st, err := controllerstore.OpenReadOnly(db.Name())
	if err != nil {
		return nil, fmt.Errorf("the snapshot does not open: %w", err)
	}
	stats, err := st.Stats(context.Background())
	st.Close()
	if err != nil {
		return nil, fmt.Errorf("the snapshot's counts: %w", err)
	}
	m.SchemaVersion, m.StateSchemaVersion, m.Revision, m.Records = stats.SchemaVersion, stats.StateSchemaVersion, stats.Revision, stats.Records
	return json.MarshalIndent(m, "", "  ")
}

// CheckStats compares what an archived database holds, as check or
// restore read it, with what the manifest records.
func (m *Manifest) CheckStats(schemaVersion, revision uint64, records map[string]int) error {
	var diffs []string
	if schemaVersion != m.SchemaVersion {
		diffs = append(diffs, fmt.Sprintf("schema version %d, the manifest says %d", schemaVersion, m.SchemaVersion))
	}
	if revision != m.Revision {
		diffs = append(diffs, fmt.Sprintf("revision %d, the manifest says %d", revision, m.Revision))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Records)) {
		if records[k] != m.Records[k] {
			diffs = append(diffs, fmt.Sprintf("%d %s records, the manifest says %d", records[k], k, m.Records[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(records)) {
		if _, ok := m.Records[k]; !ok && records[k] != 0 {
			diffs = append(diffs, fmt.Sprintf("%d %s records, the manifest says none", records[k], k))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the archived database does not hold what its manifest records: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// ErrUnverified refuses an archive that carries no manifest.
var ErrUnverified = errors.New("the archive carries no manifest (made by an earlier provisiond, or not by provisiond backup): " +
	"its contents cannot be verified")

func errUnverified() error {
	return fmt.Errorf("%w; pass --allow-unverified to use it as it is, once you trust it", ErrUnverified)
}

// ErrTampered is wrapped by the errors of an archive whose contents do not
// match its manifest.
var ErrTampered = errors.New("the archive was damaged or changed after it was made")

// UnpackArchive reads a backup archive into dir, an empty directory,
// verifying every entry against the manifest as it goes (see above), and
// returns the manifest and the files written (the manifest and its
// digest are not written). An archive without a manifest is refused with
// ErrUnverified unless allowUnverified; it is then unpacked as it is,
// with a nil manifest. Files written before an error are left in dir.
func UnpackArchive(archive io.Reader, dir string, allowUnverified bool) (*Manifest, []string, error) {
	var (
		m        *Manifest
		raw      []byte // the manifest as archived
		expected map[string]ManifestEntry
		names    []string
		digested bool
	)
	tampered := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrTampered, fmt.Sprintf(format, args...))
	}
	tr := tar.NewReader(archive)
	for first := true; ; first = false {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, names, fmt.Errorf("reading archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			return m, names, fmt.Errorf("archive holds %q, which is not part of a provisiond backup", h.Name)
		}
		if digested {
			return m, names, tampered("%q follows the manifest's digest, the last entry", h.Name)
		}
		switch {
		case h.Name == ManifestFile && first:
			if raw, err = io.ReadAll(io.LimitReader(tr, maxManifest+1)); err != nil {
				return m, names, fmt.Errorf("reading archive: %w", err)
			}
			m = new(Manifest)
			if len(raw) > maxManifest || json.Unmarshal(raw, m) != nil || m.Format != ManifestFormat {
				return nil, names, tampered("%s is not a manifest of format %s", ManifestFile, ManifestFormat)
			}
			expected = map[string]ManifestEntry{}
			for _, e := range m.Files {
				expected[e.Name] = e
			}
			continue
		case h.Name == ManifestDigestFile && m != nil:
			want, err := io.ReadAll(io.LimitReader(tr, 1024))
			if err != nil {
				return m, names, fmt.Errorf("reading archive: %w", err)
			}
			if got := sha256Hex(raw); strings.TrimSpace(string(want)) != got {
				return m, names, tampered("%s does not match its digest (SHA-256 %s, the digest says %.64q)", ManifestFile, got, want)
			}
			digested = true
			continue
		case first && !allowUnverified:
			return nil, nil, errUnverified()
		case h.Name != controllerstore.DBFile && !slices.Contains(migrate.IdentityFiles, h.Name):
			return m, names, fmt.Errorf("archive holds %q, which is not part of a provisiond backup", h.Name)
		}
		if slices.Contains(names, h.Name) {
			return m, names, fmt.Errorf("archive holds %q twice", h.Name)
		}
		e, listed := expected[h.Name]
		if m != nil && !listed {
			return m, names, tampered("%q is not in the manifest", h.Name)
		}
		sum := sha256.New()
		if err := controllerstore.WriteFileSynced(filepath.Join(dir, h.Name), io.TeeReader(tr, sum)); err != nil {
			return m, names, err
		}
		names = append(names, h.Name)
		if m == nil {
			continue
		}
		if got := hex.EncodeToString(sum.Sum(nil)); h.Size != e.Size || got != e.SHA256 {
			return m, names, tampered("%s does not match the manifest (%d bytes, SHA-256 %s; the manifest says %d bytes, %s)",
				h.Name, h.Size, got, e.Size, e.SHA256)
		}
	}
	if m == nil {
		if !allowUnverified {
			return nil, nil, errUnverified()
		}
		return nil, names, nil
	}
	for _, e := range m.Files {
		if !slices.Contains(names, e.Name) {
			return m, names, tampered("%s is in the manifest but not in the archive (cut short?)", e.Name)
		}
	}
	if !digested {
		return m, names, tampered("the archive ends without the manifest's digest (cut short?)")
	}
	return m, names, nil
}

// manifestDigest is the content of ManifestDigestFile for a manifest.
func manifestDigest(manifest []byte) []byte { return []byte(sha256Hex(manifest) + "\n") }
