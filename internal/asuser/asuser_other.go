//go:build !linux

package asuser

import "errors"

// ErrNotRoot is Do's error where it cannot work.
var ErrNotRoot = errors.New("asuser: opening sockets as another user works on Linux only")

// Supported reports whether Do can work here: never.
func Supported() bool { return false }

// Do fails here.
func Do(uint32, func() error) error { return ErrNotRoot }
