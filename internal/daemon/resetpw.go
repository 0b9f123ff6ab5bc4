package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// ResetAdminPassword gives the admin user of a stopped daemon's data dir a
// new random password and writes it into the dir's credentials.yaml
// (a deleted credentials.yaml is rewritten without passwords, which left
// no way back in). When credentials.yaml is
// missing it is made again from the database and ca.crt; when it has no
// controller agent password either, the controller agent gets a new one
// too (the controller's own login; nothing outside the data dir uses it).
// A data dir a daemon is running on is refused (controllerstore.ErrDataDirInUse). It
// returns the path written.
func ResetAdminPassword(dataDir string) (string, error) {
	dbPath := filepath.Join(dataDir, DBFile)
	if _, err := os.Stat(dbPath); err != nil {
		return "", fmt.Errorf("reset the admin password: %w", err)
	}
	st, _, err := controllerstore.OpenBolt(dbPath, nil)
	if errors.Is(err, boltstore.ErrLocked) {
		return "", fmt.Errorf("reset the admin password in %s: %w (stop it first)", dataDir, controllerstore.ErrDataDirInUse)
	}
	if err != nil {
		return "", fmt.Errorf("reset the admin password: %w", err)
	}
	defer st.Close()
	if ok, err := st.Initialized(context.Background()); err != nil {
		return "", err
	} else if !ok {
		return "", fmt.Errorf("reset the admin password: %s was never initialised", dbPath)
	}
	credsPath := filepath.Join(dataDir, CredentialsFile)
	creds, err := ReadCredentials(credsPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ctrl, err := st.Controller(context.Background())
		if err != nil {
			return "", err
		}
		creds = &Credentials{ControllerUUID: ctrl.UUID, ControllerModelUUID: ctrl.ModelUUID, AdminUser: state.AdminUser,
			ControllerAgent: ControllerAgent{Tag: "machine-0", Nonce: "user-admin:bootstrap"}}
		if m, err := st.ModelByName(context.Background(), "default"); err == nil {
			creds.DefaultModelUUID = m.UUID
		}
		if ca, err := os.ReadFile(filepath.Join(dataDir, pki.CACertFile)); err == nil {
			creds.CACert = string(ca)
		} else if s, ok := ctrl.Config["ca-cert"].(string); ok {
			creds.CACert = s
		}
		if hps, err := st.APIHostPorts(context.Background()); err == nil {
			for _, server := range hps {
				for _, hp := range server {
					creds.APIAddresses = append(creds.APIAddresses, fmt.Sprintf("%s:%d", hp.Value, hp.Port))
				}
			}
		}
	case err != nil:
		return "", err
	}
	creds.AdminUser = state.AdminUser
	creds.AdminPassword = randomPassword()
	if err := st.SetUserPassword(context.Background(), state.AdminUser, creds.AdminPassword); err != nil {
		return "", fmt.Errorf("reset the admin password: %w", err)
	}
	if creds.ControllerAgent.Password == "" {
		creds.ControllerAgent.Password = randomPassword()
		if creds.ControllerAgent.Tag == "" {
			creds.ControllerAgent.Tag, creds.ControllerAgent.Nonce = "machine-0", "user-admin:bootstrap"
		}
		id := creds.ControllerAgent.Tag[len("machine-"):]
		if err := st.SetMachinePassword(context.Background(), creds.ControllerModelUUID, id, creds.ControllerAgent.Password); err != nil {
			return "", fmt.Errorf("reset the controller agent's password: %w", err)
		}
	}
	if err := WriteCredentials(credsPath, creds); err != nil {
		return "", fmt.Errorf("reset the admin password: the database has a new password that could not be written (run this again once %s can be written): %w", credsPath, err)
	}
	return credsPath, nil
}
