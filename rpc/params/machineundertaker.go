package params

// Wire types of MachineUndertaker v1. The facade is not in the Juju 3.3
// schema (facades-schema.json): the JSON keys are those of Juju's
// rpc/params (params.go: EntitiesResults; network.go:
// ProviderInterfaceInfoResults) at the commit the project follows.

// EntitiesResult is one query's entities, or its error. Entities is
// written as null when there are none, as Juju's facade leaves it nil.
type EntitiesResult struct {
	Entities []Entity `json:"entities"`
	Error    *Error   `json:"error,omitempty"`
}

// EntitiesResults is a bulk of EntitiesResult.
type EntitiesResults struct {
	Results []EntitiesResult `json:"results"`
}

// ProviderInterfaceInfo names one network interface of a machine to its
// provider.
type ProviderInterfaceInfo struct {
	InterfaceName string `json:"interface-name"`
	MACAddress    string `json:"mac-address"`
	ProviderId    string `json:"provider-id"`
}

// ProviderInterfaceInfoResult is one machine's interfaces, or its error.
type ProviderInterfaceInfoResult struct {
	MachineTag string                  `json:"machine-tag"`
	Interfaces []ProviderInterfaceInfo `json:"interfaces"`
	Error      *Error                  `json:"error,omitempty"`
}

// ProviderInterfaceInfoResults is a bulk of ProviderInterfaceInfoResult.
type ProviderInterfaceInfoResults struct {
	Results []ProviderInterfaceInfoResult `json:"results"`
}
