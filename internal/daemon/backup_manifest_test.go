package daemon_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

type tarFile struct {
	name string
	data []byte
}

// untar reads an archive's entries in order.
func untar(t *testing.T, archive []byte) []tarFile {
	t.Helper()
	var out []tarFile
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarFile{h.Name, b})
	}
}

// retar writes entries as an archive, as the daemon does.
func retar(t *testing.T, files []tarFile) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// edited returns a copy of files with the entry named name passed
// through edit (which may return nil to drop it).
func edited(files []tarFile, name string, edit func([]byte) []byte) []tarFile {
	var out []tarFile
	for _, f := range files {
		data := bytes.Clone(f.data)
		if f.name == name {
			if data = edit(data); data == nil {
				continue
			}
		}
		out = append(out, tarFile{f.name, data})
	}
	return out
}

// flip changes one byte, in the middle.
func flip(b []byte) []byte {
	b[len(b)/2] ^= 0x01
	return b
}

// withManifest rewrites the manifest with change applied and its digest
// recomputed: a consistent archive whose manifest lies.
func withManifest(t *testing.T, files []tarFile, change func(*backup.Manifest)) []tarFile {
	t.Helper()
	var raw []byte
	files = edited(files, backup.ManifestFile, func(b []byte) []byte {
		var m backup.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		change(&m)
		raw = mustJSON(m)
		return raw
	})
	sum := sha256.Sum256(raw)
	return edited(files, backup.ManifestDigestFile, func([]byte) []byte { return []byte(hex.EncodeToString(sum[:]) + "\n") })
}

// Every archive carries a manifest that restore verifies: a changed byte in
// any part of an archive (the database, each small file, the manifest,
// its digest), a file missing or added, an archive cut short and a
// manifest that lies about the database are each refused with
// ErrTampered, and nothing is restored. The attack: a model's config
// value changed inside the archived database (a valid bbolt file) was
// restored and served. An archive without a manifest (an earlier
// provisiond's) is refused unless allowed.
func TestArchiveTamperingRefused(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	if err := d.State().UpdateModelConfig(t.Context(), creds.DefaultModelUUID, map[string]any{"secret-setting": "original"}, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := backup.Fetch(ctxT(t), &creds, &buf, nil); err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())
	if files[0].name != backup.ManifestFile || files[len(files)-1].name != backup.ManifestDigestFile {
		t.Fatalf("archive entries: first %s, last %s", files[0].name, files[len(files)-1].name)
	}
	var m backup.Manifest
	if err := json.Unmarshal(files[0].data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != backup.ManifestFormat || m.Controller != creds.ControllerUUID || m.Revision == 0 || m.Records["model"] != 2 ||
		len(m.Files) != len(files)-2 {
		t.Fatalf("manifest: %+v", m)
	}

	// The attack: the config value changed in the archived database.
	changedDB := func(t *testing.T) []tarFile {
		dir := t.TempDir()
		path := filepath.Join(dir, daemon.DBFile)
		for _, f := range files {
			if f.name == daemon.DBFile {
				if err := os.WriteFile(path, f.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		st, err := statetest.OpenBolt(path, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateModelConfig(t.Context(), creds.DefaultModelUUID, map[string]any{"secret-setting": "altered"}, nil); err != nil {
			t.Fatal(err)
		}
		st.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return edited(files, daemon.DBFile, func([]byte) []byte { return b })
	}

	cases := []struct {
		name  string
		files func(t *testing.T) []tarFile
		want  string
	}{
		{"config value changed in the database", changedDB, "provisiond.db does not match the manifest"},
		{"byte of the database", func(*testing.T) []tarFile { return edited(files, daemon.DBFile, flip) }, "provisiond.db does not match the manifest"},
		{"byte of credentials.yaml", func(*testing.T) []tarFile { return edited(files, daemon.CredentialsFile, flip) }, "credentials.yaml does not match the manifest"},
		{"byte of the CA key", func(*testing.T) []tarFile { return edited(files, "ca.key", flip) }, "ca.key does not match the manifest"},
		{"byte of the manifest", func(*testing.T) []tarFile {
			return edited(files, backup.ManifestFile, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"revision": `), []byte(`"revision": 9`), 1)
			})
		}, "manifest.json does not match its digest"},
		{"byte of the digest", func(*testing.T) []tarFile { return edited(files, backup.ManifestDigestFile, flip) }, "manifest.json does not match its digest"},
		{"digest missing", func(*testing.T) []tarFile {
			return edited(files, backup.ManifestDigestFile, func([]byte) []byte { return nil })
		}, "ends without the manifest's digest"},
		{"a file missing", func(*testing.T) []tarFile { return edited(files, "server.key", func([]byte) []byte { return nil }) }, "server.key is in the manifest but not in the archive"},
		{"a file after the digest", func(*testing.T) []tarFile {
			return append(edited(files, "server.key", func([]byte) []byte { return nil }), tarFile{"server.key", files[len(files)-3].data})
		}, `"server.key" follows the manifest's digest`},
		{"a file not in the manifest", func(t *testing.T) []tarFile {
			return withManifest(t, files, func(m *backup.Manifest) { m.Files = m.Files[1:] })
		}, "is not in the manifest"},
		{"the manifest lies about the revision", func(t *testing.T) []tarFile {
			return withManifest(t, files, func(m *backup.Manifest) { m.Revision++ })
		}, "the manifest says"},
		{"the manifest lies about the records", func(t *testing.T) []tarFile {
			return withManifest(t, files, func(m *backup.Manifest) { m.Records["model"] = 3 })
		}, "2 model records, the manifest says 3"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			err := backup.Restore(bytes.NewReader(retar(t, tt.files(t))), dir, backup.RestoreOptions{})
			if !errors.Is(err, backup.ErrTampered) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("restore: %v; want refused (tampered): %q", err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, daemon.DBFile)); err == nil {
				t.Error("a database was restored")
			}
		})
	}
	t.Run("cut short", func(t *testing.T) {
		for _, n := range []int{len(buf.Bytes()) - 2048, len(buf.Bytes()) / 2, 1024} {
			err := backup.Restore(bytes.NewReader(buf.Bytes()[:n]), filepath.Join(t.TempDir(), "data"), backup.RestoreOptions{})
			if err == nil {
				t.Errorf("an archive cut to %d bytes restored", n)
			}
		}
	})

	// An earlier provisiond's archive (no manifest): refused, unless
	// allowed, and then restored as it is.
	old := edited(edited(files, backup.ManifestFile, func([]byte) []byte { return nil }), backup.ManifestDigestFile, func([]byte) []byte { return nil })
	dir := filepath.Join(t.TempDir(), "data")
	if err := backup.Restore(bytes.NewReader(retar(t, old)), dir, backup.RestoreOptions{}); !errors.Is(err, backup.ErrUnverified) ||
		!strings.Contains(err.Error(), "--allow-unverified") {
		t.Fatalf("restore of an archive without a manifest: %v", err)
	}
	if err := backup.Restore(bytes.NewReader(retar(t, old)), dir, backup.RestoreOptions{AllowUnverified: true}); err != nil {
		t.Fatalf("restore of an archive without a manifest, allowed: %v", err)
	}
	// The untouched archive restores, with the original value.
	dir = filepath.Join(t.TempDir(), "data")
	if err := backup.Restore(bytes.NewReader(buf.Bytes()), dir, backup.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := controllerstore.OpenReadOnly(filepath.Join(dir, daemon.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if mdl, err := st.Model(t.Context(), creds.DefaultModelUUID); err != nil || mdl.Config["secret-setting"] != "original" {
		t.Errorf("restored config: %v, %v", mdl.Config["secret-setting"], err)
	}
}
