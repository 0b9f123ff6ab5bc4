// Package credentials is what the daemon and its clients share about a
// data dir: where it is by default and the credentials.yaml the daemon
// writes in it (API addresses, the CA certificate, the admin user's and the
// controller agent's logins). It imports nothing of provisiond's, so the
// operator CLI and integration tests in other repositories can read
// credentials without linking the server; rpc/client.DialCredentials dials
// them.
//
// The file holds passwords: it is written with mode 0600, and nothing here
// logs its content.
package credentials

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// File is the name of the credentials file in the data dir.
const File = "credentials.yaml"

// Credentials is what an operator (or provisionctl) needs to reach the
// daemon. It is written at first start with mode 0600 and kept across
// restarts; only api-addresses is refreshed.
type Credentials struct {
	ControllerUUID      string          `yaml:"controller-uuid" json:"controller-uuid"`
	ControllerModelUUID string          `yaml:"controller-model-uuid" json:"controller-model-uuid"`
	DefaultModelUUID    string          `yaml:"default-model-uuid" json:"default-model-uuid"`
	APIAddresses        []string        `yaml:"api-addresses" json:"api-addresses"`
	CACert              string          `yaml:"ca-cert" json:"ca-cert"`
	AdminUser           string          `yaml:"admin-user" json:"admin-user"`
	AdminPassword       string          `yaml:"admin-password" json:"admin-password"`
	ControllerAgent     ControllerAgent `yaml:"controller-agent" json:"controller-agent"`
}

// ControllerAgent is the login of the controller agent, machine-0 of the
// controller model.
type ControllerAgent struct {
	Tag      string `yaml:"tag" json:"tag"`
	Password string `yaml:"password" json:"password"`
	Nonce    string `yaml:"nonce" json:"nonce"`
}

// DefaultDataDir is the daemon's default data dir: $XDG_DATA_HOME/provisiond,
// or ~/.local/share/provisiond. getenv is os.Getenv outside tests.
func DefaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "provisiond")
	}
	home := getenv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	return filepath.Join(home, ".local", "share", "provisiond")
}

// DefaultPath is credentials.yaml in the default data dir.
func DefaultPath(getenv func(string) string) string {
	return filepath.Join(DefaultDataDir(getenv), File)
}

// Read reads a credentials file. A missing file is an error matching
// fs.ErrNotExist.
func Read(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Credentials
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("read credentials %s: %w", path, err)
	}
	return &c, nil
}

// Write writes c to path atomically with mode 0600.
func Write(path string, c *Credentials) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}

func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
