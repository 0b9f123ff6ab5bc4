package state

import "time"

// Status is one status record of an entity.
type Status struct {
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Data    map[string]any `json:"data"`
	Since   time.Time      `json:"since,omitzero"`
}
