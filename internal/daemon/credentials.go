package daemon

import "github.com/provisiond/provisiond/credentials"

// CredentialsFile is the name of the credentials file in the data dir.
const CredentialsFile = credentials.File

// Credentials is the content of credentials.yaml (see package
// credentials, which provisionctl and other clients share).
type Credentials = credentials.Credentials

// ControllerAgent is the login of the controller agent.
type ControllerAgent = credentials.ControllerAgent

// ReadCredentials reads a credentials file. A missing file is an error
// matching fs.ErrNotExist.
func ReadCredentials(path string) (*Credentials, error) { return credentials.Read(path) }

// WriteCredentials writes c to path atomically with mode 0600.
func WriteCredentials(path string, c *Credentials) error { return credentials.Write(path, c) }
