package params

// Code is an error code as a value errors.Is can match: an *Error (or an
// error wrapping one) is a Code when its Code field is that code.
//
//	if errors.Is(err, params.Code(params.CodeNotFound)) { ... }
//
// rpc/client exports one constant of this type per code (client.ErrNotFound,
// ...). A Code's Error text is the code itself.
type Code string

// Error implements error.
func (c Code) Error() string { return string(c) }

// Is reports whether target is the Code of e, so that errors.Is(err,
// Code(...)) matches a call's error and a bulk result item's error alike. A
// nil *Error matches nothing.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && e != nil && e.Code == string(c)
}
