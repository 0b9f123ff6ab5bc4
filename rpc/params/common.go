package params

import "time"

// Entity names one entity by tag.
type Entity struct {
	Tag string `json:"tag"`
}

// Entities is the argument of most bulk calls.
type Entities struct {
	Entities []Entity `json:"entities"`
}

// ErrorResult is one item of ErrorResults.
type ErrorResult struct {
	Error *Error `json:"error,omitempty"`
}

// ErrorResults is the result of bulk calls that only report errors.
type ErrorResults struct {
	Results []ErrorResult `json:"results"`
}

// StringResult holds one string or an error.
type StringResult struct {
	Error  *Error `json:"error,omitempty"`
	Result string `json:"result"`
}

// StringResults is a bulk of StringResult.
type StringResults struct {
	Results []StringResult `json:"results"`
}

// StringsResult holds a list of strings or an error.
type StringsResult struct {
	Error  *Error   `json:"error,omitempty"`
	Result []string `json:"result,omitempty"`
}

// BoolResult holds one bool or an error.
type BoolResult struct {
	Error  *Error `json:"error,omitempty"`
	Result bool   `json:"result"`
}

// BoolResults is a bulk of BoolResult.
type BoolResults struct {
	Results []BoolResult `json:"results"`
}

// LifeResult holds the life of one entity.
type LifeResult struct {
	Error *Error `json:"error,omitempty"`
	Life  string `json:"life"`
}

// LifeResults is a bulk of LifeResult.
type LifeResults struct {
	Results []LifeResult `json:"results"`
}

// NotifyWatchResult is the result of a Watch* call returning a notify
// watcher. The key really is capitalised.
type NotifyWatchResult struct {
	NotifyWatcherId string `json:"NotifyWatcherId"`
	Error           *Error `json:"error,omitempty"`
}

// NotifyWatchResults is a bulk of NotifyWatchResult.
type NotifyWatchResults struct {
	Results []NotifyWatchResult `json:"results"`
}

// StringsWatchResult is the result of a Watch* call returning a strings
// watcher, and of StringsWatcher.Next (with an empty watcher id).
type StringsWatchResult struct {
	StringsWatcherId string   `json:"watcher-id"`
	Changes          []string `json:"changes,omitempty"`
	Error            *Error   `json:"error,omitempty"`
}

// StringsWatchResults is a bulk of StringsWatchResult.
type StringsWatchResults struct {
	Results []StringsWatchResult `json:"results"`
}

// ModelConfigResult carries a model's configuration.
type ModelConfigResult struct {
	Config map[string]any `json:"config"`
}

// ControllerConfigResult carries the controller's configuration.
type ControllerConfigResult struct {
	Config map[string]any `json:"config"`
}

// StringsResults is a bulk of StringsResult.
type StringsResults struct {
	Results []StringsResult `json:"results"`
}

// EntityPassword is one password change.
type EntityPassword struct {
	Tag      string `json:"tag"`
	Password string `json:"password"`
}

// EntityPasswords is the argument of SetPasswords.
type EntityPasswords struct {
	Changes []EntityPassword `json:"changes"`
}

// EntityStatusArgs sets the status of one entity.
type EntityStatusArgs struct {
	Tag    string         `json:"tag"`
	Status string         `json:"status"`
	Info   string         `json:"info"`
	Data   map[string]any `json:"data"`
}

// SetStatus is the argument of SetStatus and friends.
type SetStatus struct {
	Entities []EntityStatusArgs `json:"entities"`
}

// StatusResult is the status of one entity.
type StatusResult struct {
	Error  *Error         `json:"error,omitempty"`
	Id     string         `json:"id"`
	Life   string         `json:"life"`
	Status string         `json:"status"`
	Info   string         `json:"info"`
	Data   map[string]any `json:"data"`
	Since  *time.Time     `json:"since"`
}

// StatusResults is a bulk of StatusResult.
type StatusResults struct {
	Results []StatusResult `json:"results"`
}

// BytesResult carries bytes; encoding/json sends them as base64.
type BytesResult struct {
	Result []byte `json:"result"`
}

// APIHostPortsResult lists the API servers' addresses.
type APIHostPortsResult struct {
	Servers [][]HostPort `json:"servers"`
}
