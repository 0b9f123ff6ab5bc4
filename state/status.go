package state

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/juju/errors"
)

// Status is one status record of an entity.
type Status struct {
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Data    map[string]any `json:"data"`
	Since   time.Time      `json:"since,omitzero"`
}

// Status size limits. A status is sent back whole in every status reply
// (an agent's Status, an operator's status of the model), so what one
// entity's status may hold is bounded when it is set; the nesting of its
// data's values is bounded where it arrives (rpc.MaxValueDepth). Juju's
// own data is a key or two ({"transient": true}, a Kubernetes reason) and
// its messages a line or an error's text.
const (
	// MaxStatusMessage is the longest status message, in bytes.
	MaxStatusMessage = 16 << 10
	// MaxStatusData is the largest status data, in bytes of JSON.
	MaxStatusData = 16 << 10
)

// checkStatusSize refuses a status (of what, "machine 3") whose message or
// data is over MaxStatusMessage or MaxStatusData: NotValid.
func checkStatusSize(what, message string, data map[string]any) error {
	if len(message) > MaxStatusMessage {
		return errors.NewNotValid(nil, fmt.Sprintf("status message of %s: %d bytes (limit %d)", what, len(message), MaxStatusMessage))
	}
	if len(data) == 0 {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return errors.NewNotValid(err, fmt.Sprintf("status data of %s", what))
	}
	if len(b) > MaxStatusData {
		return errors.NewNotValid(nil, fmt.Sprintf("status data of %s: %d bytes of JSON (limit %d)", what, len(b), MaxStatusData))
	}
	return nil
}
