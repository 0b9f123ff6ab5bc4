package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/daemon"
)

// flipIn returns archive with one byte of entry name changed (in the middle
// of its content).
func flipIn(t *testing.T, archive []byte, name string) []byte {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(archive))
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b[len(b)/2] ^= 1
			found = true
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("the archive holds no %s", name)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// check --archive verifies an archive as restore does, without restoring
// it: a good one passes (text and JSON say so); a byte changed in the
// database, the manifest or its digest fails check and restore alike,
// with the reason; an encrypted archive is checked through its
// identity.
func TestCheckArchive(t *testing.T) {
	d, _ := startInProcess(t)
	creds := d.Credentials()
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := backup.Fetch(ctx, &creds, &buf, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	if err := os.WriteFile(good, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytesBuffer
	if code := run([]string{"check", "--archive", good}, &out, &errOut); code != 0 {
		t.Fatalf("check --archive: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"controller " + creds.ControllerUUID, "files match the manifest and its digest", "consistency check: ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check --archive output lacks %q:\n%s", want, out.String())
		}
	}
	out = bytesBuffer{}
	if code := run([]string{"check", "--archive", good, "--format", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("check --archive --format json: exit %d", code)
	}
	var rep checkReport
	if err := json.Unmarshal(out.b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Archive == nil || !rep.Archive.Verified || rep.Archive.Manifest.Revision != rep.Revision {
		t.Errorf("report: %+v", rep)
	}

	for _, part := range []string{daemon.DBFile, backup.ManifestFile, backup.ManifestDigestFile} {
		t.Run(part, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.tar")
			if err := os.WriteFile(bad, flipIn(t, buf.Bytes(), part), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytesBuffer
			if code := run([]string{"check", "--archive", bad}, &out, &errOut); code != 1 ||
				!strings.Contains(errOut.String(), "damaged or changed after it was made") {
				t.Errorf("check --archive: exit %d\n%s%s", code, out.String(), errOut.String())
			}
			target := filepath.Join(t.TempDir(), "data")
			errOut = bytesBuffer{}
			if code := run([]string{"restore", bad, "--data-dir", target}, &out, &errOut); code != 1 ||
				!strings.Contains(errOut.String(), "damaged or changed after it was made") {
				t.Errorf("restore: exit %d\n%s", code, errOut.String())
			}
			if _, err := os.Stat(filepath.Join(target, daemon.DBFile)); err == nil {
				t.Error("restore wrote a database")
			}
		})
	}

	// Encrypted (to a public key; a passphrase's scrypt is slow under
	// -race): checked through its identity.
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(dir, "id")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(dir, "enc.tar.age")
	f, err := os.Create(enc)
	if err != nil {
		t.Fatal(err)
	}
	w, err := encryptTo(f, []age.Recipient{id.Recipient()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, errOut = bytesBuffer{}, bytesBuffer{}
	if code := run([]string{"check", "--archive", enc, "--identity", idFile}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "files match the manifest") {
		t.Errorf("check --archive of an encrypted archive: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if code := run([]string{"check", "--identity", idFile}, &out, &errOut); code != 2 {
		t.Errorf("--identity without --archive: exit %d", code)
	}
}
