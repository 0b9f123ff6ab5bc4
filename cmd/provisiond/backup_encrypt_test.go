package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/provisiond/provisiond/internal/daemon"
)

// runDetached runs the built provisiond as runBin does, in a session of
// its own: it has no terminal to ask a passphrase on.
func runDetached(t *testing.T, environ []string, args ...string) cliResult {
	t.Helper()
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, environ...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %q: %v", args, err)
	}
	return cliResult{code, stdout.String(), stderr.String()}
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A backup archive holds the admin password and the CA
// key, so it is made 0600, its help says so, and backup encrypts it with
// a passphrase or to a public key; restore decrypts it, and refuses a
// wrong key without leaving a data dir.
func TestBackupEncrypted(t *testing.T) {
	d, dir := startInProcess(t)
	env := []string{"PROVISIOND_DATA_DIR=" + dir}
	work := t.TempDir()
	admin := d.Credentials().AdminPassword
	if admin == "" {
		t.Fatal("no admin password")
	}

	r := runDetached(t, nil, "backup", "--help")
	if !strings.Contains(r.stdout, "credentials.yaml (the admin's and\nthe controller agent's passwords)") || !strings.Contains(r.stdout, "--encrypt") {
		t.Errorf("backup --help does not say what the archive holds:\n%s", r.stdout)
	}

	// A plain archive: 0600 even over a leftover .partial of mode 0644,
	// and the message says what it holds.
	plain := filepath.Join(work, "plain.tar")
	writeFile(t, plain+".partial", "left over")
	if err := os.Chmod(plain+".partial", 0o644); err != nil {
		t.Fatal(err)
	}
	r = runDetached(t, env, "backup", "--output", plain)
	if r.code != 0 || !strings.Contains(r.stderr, "keep it private, or use --encrypt") {
		t.Fatalf("plain backup: %+v", r)
	}
	if fi, err := os.Stat(plain); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("plain archive: %v, mode %v; want 0600", err, fi.Mode())
	}

	// With a passphrase.
	pass := writeFile(t, filepath.Join(work, "pass"), "correct horse battery staple\n")
	enc := filepath.Join(work, "backup.tar.age")
	r = runDetached(t, env, "backup", "--encrypt", "--passphrase-file", pass, "--output", enc)
	if r.code != 0 || !strings.Contains(r.stderr, "(encrypted)") {
		t.Fatalf("backup --encrypt: %+v", r)
	}
	b, err := os.ReadFile(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("age-encryption.org/v1\n")) || bytes.Contains(b, []byte(admin)) || bytes.Contains(b, []byte("PRIVATE KEY")) {
		t.Errorf("encrypted archive is not age, or shows a secret (%d bytes)", len(b))
	}
	if fi, _ := os.Stat(enc); fi.Mode().Perm() != 0o600 {
		t.Errorf("encrypted archive mode %v, want 0600", fi.Mode())
	}

	// Restore: without the passphrase, and no terminal, it says what it
	// needs; a wrong one is refused; neither leaves a data dir.
	target := filepath.Join(t.TempDir(), "restored")
	r = runDetached(t, nil, "restore", enc, "--data-dir", target)
	if r.code != 1 || !strings.Contains(r.stderr, "the archive is encrypted") || !strings.Contains(r.stderr, "--passphrase-file") {
		t.Errorf("restore without a passphrase: %+v", r)
	}
	wrong := writeFile(t, filepath.Join(work, "wrong"), "Tr0ub4dor&3\n")
	r = runDetached(t, nil, "restore", enc, "--passphrase-file", wrong, "--data-dir", target)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot decrypt the archive: wrong passphrase or identity") {
		t.Errorf("restore with a wrong passphrase: %+v", r)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s (%v)", target, err)
	}
	// $PROVISIOND_PASSPHRASE_FILE gives it as well as the flag.
	r = runDetached(t, []string{"PROVISIOND_PASSPHRASE_FILE=" + pass}, "restore", enc, "--data-dir", target)
	if r.code != 0 {
		t.Fatalf("restore with the passphrase: %+v", r)
	}
	creds, err := daemon.ReadCredentials(filepath.Join(target, daemon.CredentialsFile))
	if err != nil || creds.AdminPassword != admin {
		t.Fatalf("restored credentials: %v (admin password kept: %v)", err, err == nil && creds.AdminPassword == admin)
	}
	if r := runDetached(t, nil, "check", "--data-dir", target); r.code != 0 {
		t.Errorf("check of the restored data dir: %+v", r)
	}

	// To a public key: restore needs the private key.
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := writeFile(t, filepath.Join(work, "key.txt"), "# a test key\n"+id.String()+"\n")
	keyed := filepath.Join(work, "keyed.tar.age")
	r = runDetached(t, env, "backup", "--recipient", id.Recipient().String(), "--output", keyed)
	if r.code != 0 {
		t.Fatalf("backup --recipient: %+v", r)
	}
	r = runDetached(t, nil, "restore", keyed, "--passphrase-file", pass, "--data-dir", filepath.Join(t.TempDir(), "x"))
	if r.code != 1 || !strings.Contains(r.stderr, "wrong passphrase or identity") {
		t.Errorf("restore of a keyed archive with a passphrase: %+v", r)
	}
	if r := runDetached(t, nil, "restore", keyed, "--identity", idFile, "--data-dir", filepath.Join(t.TempDir(), "y")); r.code != 0 {
		t.Errorf("restore --identity: %+v", r)
	}
	// --recipients-file, to stdout.
	rfile := writeFile(t, filepath.Join(work, "recipients"), "# ops\n"+id.Recipient().String()+"\n")
	r = runDetached(t, env, "backup", "--recipients-file", rfile, "--output", "-")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "age-encryption.org/v1\n") {
		t.Errorf("backup --recipients-file --output -: code %d, %q", r.code, r.stderr)
	}
	// --identity on a plain archive is a mistake worth naming.
	r = runDetached(t, nil, "restore", plain, "--identity", idFile, "--data-dir", filepath.Join(t.TempDir(), "z"))
	if r.code != 1 || !strings.Contains(r.stderr, "not encrypted") {
		t.Errorf("restore --identity of a plain archive: %+v", r)
	}
}

// Bad encryption flags are refused before the daemon is called (its
// credentials point nowhere here).
func TestBackupEncryptFlagsCheckedFirst(t *testing.T) {
	nowhere := []string{"PROVISIOND_DATA_DIR=" + t.TempDir()}
	out := filepath.Join(t.TempDir(), "b.tar")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--recipient", "age1notakey"}, 2, "an age public key starts with age1"},
		{[]string{"--encrypt", "--recipient", "age1x"}, 2, "do not go together"},
		{[]string{"--encrypt"}, 1, "no terminal to ask on: give --passphrase-file FILE"},
		{[]string{"--encrypt", "--passphrase-file", writeFile(t, filepath.Join(t.TempDir(), "empty"), "\n")}, 1, "the first line is empty"},
		{[]string{"--recipients-file", filepath.Join(t.TempDir(), "missing")}, 1, "--recipients-file: open"},
	} {
		r := runDetached(t, nowhere, append([]string{"backup", "--output", out}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "credentials") {
			t.Errorf("backup %q: code %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused backup wrote %s", out)
	}
}
