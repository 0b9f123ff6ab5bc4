package state

import "github.com/provisiond/provisiond/environ"

// seriesAsBase returns what AddMachine stores for a base and a 2015
// series: the base when there is one (the series is dropped: one OS per
// machine); else the series' base (Juju's table, environ.SeriesBase) at
// the stable risk, as ParseBase gives it; else the series as it is.
func seriesAsBase(b Base, series string) (Base, string) {
	if b != (Base{}) {
		return b, ""
	}
	if os, track, ok := environ.SeriesBase(series); ok {
		return Base{Name: os, Channel: track + "/stable"}, ""
	}
	return b, series
}

// Base is the OS a machine runs (v11).
type Base struct {
	Name    string `json:"name"`
	Channel string `json:"channel"`
}
