package params

import "fmt"

// The one way a history change is shown as text: provisionctl history's
// lines and the dashboard's history panels both use these.

// WhoText is who made the change: the tag, "@address" and "/daemon" when
// known ("-" for the daemon's own work).
func (c HistoryChange) WhoText() string {
	who := c.Who
	if who == "" {
		who = "-"
	}
	if c.Address != "" {
		who += "@" + c.Address
	}
	if c.Daemon != "" {
		who += "/" + c.Daemon
	}
	return who
}

// CallText is the call that made the change, Facade.Method ("-": none).
func (c HistoryChange) CallText() string {
	if c.Call == "" {
		return "-"
	}
	return c.Call
}

// EntityText is KIND/ID; when model is "" (the changes of every model) an
// entity of a model is MODEL-UUID:KIND/ID.
func (c HistoryChange) EntityText(model string) string {
	entity := c.Kind + "/" + c.ID
	if c.Model != "" && model == "" && c.Kind != "model" {
		entity = c.Model + ":" + entity
	}
	return entity
}

// WhatText is what the change did: "created VALUE", "removed VALUE", or
// "FIELD: BEFORE -> AFTER" ("(whole)" for a record replaced whole, "-"
// for a value not there). value shows each value (provisionctl cuts
// them; nil: whole).
func (c HistoryChange) WhatText(value func(string) string) string {
	if value == nil {
		value = func(s string) string { return s }
	}
	orDash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	switch c.Op {
	case "created":
		return "created " + value(c.After)
	case "removed":
		return "removed " + value(c.Before)
	}
	field := c.Field
	if field == "" {
		field = "(whole)"
	}
	return field + ": " + orDash(value(c.Before)) + " -> " + orDash(value(c.After))
}

// Line is the change as one line of provisionctl history:
//
//	REVISION TIME WHO@ADDRESS/DAEMON FACADE.METHOD ENTITY WHAT
func (c HistoryChange) Line(model string, value func(string) string) string {
	return fmt.Sprintf("%d %s %s %s %s %s", c.Revision, c.Time, c.WhoText(), c.CallText(), c.EntityText(model), c.WhatText(value))
}
