package params

// SetError methods let the facades' generic bulk helper set the error of
// any result item.

func (r *ErrorResult) SetError(e *Error)                      { r.Error = e }
func (r *StringResult) SetError(e *Error)                     { r.Error = e }
func (r *StringsResult) SetError(e *Error)                    { r.Error = e }
func (r *BoolResult) SetError(e *Error)                       { r.Error = e }
func (r *LifeResult) SetError(e *Error)                       { r.Error = e }
func (r *StatusResult) SetError(e *Error)                     { r.Error = e }
func (r *NotifyWatchResult) SetError(e *Error)                { r.Error = e }
func (r *StringsWatchResult) SetError(e *Error)               { r.Error = e }
func (r *ConstraintsResult) SetError(e *Error)                { r.Error = e }
func (r *DistributionGroupResult) SetError(e *Error)          { r.Error = e }
func (r *ToolsResult) SetError(e *Error)                      { r.Error = e }
func (r *MachineNetworkConfigResult) SetError(e *Error)       { r.Error = e }
func (r *ContainerProfileResult) SetError(e *Error)           { r.Error = e }
func (r *HostNetworkChange) SetError(e *Error)                { r.Error = e }
func (r *ProvisioningInfoResult) SetError(e *Error)           { r.Error = e }
func (r *MachineContainerResult) SetError(e *Error)           { r.Error = e }
func (r *ControllerAPIInfoResult) SetError(e *Error)          { r.Error = e }
func (r *IntResult) SetError(e *Error)                        { r.Error = e }
func (r *ConfigResult) SetError(e *Error)                     { r.Error = e }
func (r *KubernetesProvisioningInfoResult) SetError(e *Error) { r.Error = e }
func (r *UpdateApplicationUnitResult) SetError(e *Error)      { r.Error = e }
func (r *EntitiesResult) SetError(e *Error)                   { r.Error = e }
func (r *ProviderInterfaceInfoResult) SetError(e *Error)      { r.Error = e }
