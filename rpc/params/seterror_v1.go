package params

// SetError methods of the 2015 result items, so the facades' one bulk
// helper sets their error too (converted to the 2015 shape).

func (r *V1ErrorResult) SetError(e *Error)            { r.Error = ToV1Error(e) }
func (r *V1StringResult) SetError(e *Error)           { r.Error = ToV1Error(e) }
func (r *V1RequestedNetworkResult) SetError(e *Error) { r.Error = ToV1Error(e) }
func (r *V1ProvisioningInfoResult) SetError(e *Error) { r.Error = ToV1Error(e) }
