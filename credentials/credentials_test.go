package credentials

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultDataDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := DefaultDataDir(env(map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"})); got != "/x/provisiond" {
		t.Errorf("with XDG_DATA_HOME: %q", got)
	}
	if got := DefaultDataDir(env(map[string]string{"HOME": "/h"})); got != "/h/.local/share/provisiond" {
		t.Errorf("with HOME: %q", got)
	}
	if got := DefaultPath(env(map[string]string{"HOME": "/h"})); got != "/h/.local/share/provisiond/credentials.yaml" {
		t.Errorf("DefaultPath: %q", got)
	}
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), File)
	if _, err := Read(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	in := &Credentials{ControllerUUID: "c", APIAddresses: []string{"127.0.0.1:1"}, AdminUser: "admin",
		AdminPassword: "pw", ControllerAgent: ControllerAgent{Tag: "machine-0", Password: "p", Nonce: "n"}}
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v %v", info, err)
	}
	out, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.ControllerUUID != "c" || out.APIAddresses[0] != "127.0.0.1:1" || out.ControllerAgent != in.ControllerAgent {
		t.Fatalf("read back %+v", out)
	}
	if err := os.WriteFile(path, []byte("api-addresses: {"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("malformed file read without error")
	}
}
