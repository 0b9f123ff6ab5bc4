package params

// Wire types of ModelAdmin v1, provisiond's own operator facade. Keys are
// hyphenated in Juju's style. Models are named by name, not UUID: an empty
// name means the connection's model on a model endpoint and "default" on
// the controller endpoint (/api).

// ModelArgs names the model a call is about.
type ModelArgs struct {
	Model string `json:"model,omitempty"`
}

// ModelSummary describes one model.
type ModelSummary struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
	// Type is "iaas" or "caas".
	Type string `json:"type"`
	// Life is "alive" or "dying"; "dead" in the answer of a RemoveModel
	// that removed the model.
	Life string `json:"life"`
	// IsController marks the controller model.
	IsController bool `json:"is-controller,omitempty"`
}

// ListModelsResult is the result of ListModels, sorted by name.
type ListModelsResult struct {
	Models []ModelSummary `json:"models"`
}

// AddModelArgs is the argument of AddModel.
type AddModelArgs struct {
	Name string `json:"name"`
	// Type is "iaas" (the default when empty) or "caas".
	Type string `json:"type,omitempty"`
	// Config is the model's initial config: string, number or bool values.
	Config map[string]any `json:"config,omitempty"`
}

// RemoveModelArgs is the argument of RemoveModel. The model must be named:
// there is no default.
type RemoveModelArgs struct {
	Model string `json:"model"`
	// DestroyStorage says what becomes of the model's persistent storage,
	// as Juju's destroy-model (its key): true destroys it, false releases
	// it (left in the cloud, no longer managed). Left out, a model that
	// holds persistent storage is refused (code "controller/model has
	// persistent storage").
	DestroyStorage *bool `json:"destroy-storage,omitempty"`
}

// RemoveModelResult is the result of RemoveModel.
type RemoveModelResult struct {
	ModelSummary
	// Removed is true when the model is gone; false when it is dying and
	// will be removed with its last entity.
	Removed bool `json:"removed"`
	// Storage is the storage the call took out of the model, destroyed or
	// released.
	Storage []RemovedStorage `json:"storage"`
}

// RemovedStorage is a storage instance, filesystem or volume taken out of
// a model.
type RemovedStorage struct {
	// Kind is "storage", "filesystem" or "volume".
	Kind string `json:"kind"`
	// ID is the storage id ("data/0"), filesystem id or volume id.
	ID string `json:"id"`
	// ProviderID is the cloud's id, once provisioned.
	ProviderID string `json:"provider-id,omitempty"`
	// Released is true when the storage was released (left in the cloud,
	// no longer managed); false when it was destroyed.
	Released bool `json:"released"`
}

// ModelConfigInfo is a model's stored config (ModelConfig, SetModelConfig).
type ModelConfigInfo struct {
	Model  string         `json:"model"`
	UUID   string         `json:"uuid"`
	Config map[string]any `json:"config"`
	// Defaults are Juju's defaults for the model's type: the value each
	// key with a default has when the model is created and takes back
	// when it is unset.
	Defaults map[string]any `json:"defaults,omitempty"`
}

// SetModelConfigArgs sets and unsets keys of a model's config in one
// commit. A key may not be both set and unset.
type SetModelConfigArgs struct {
	Model  string         `json:"model,omitempty"`
	Config map[string]any `json:"config,omitempty"`
	Unset  []string       `json:"unset,omitempty"`
}

// SetControllerConfigArgs sets and unsets keys of the controller config in
// one commit.
type SetControllerConfigArgs struct {
	Config map[string]any `json:"config,omitempty"`
	Unset  []string       `json:"unset,omitempty"`
}
