package charm

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The assumes block of metadata.yaml: a list of expressions, all of which
// must hold. An expression is a feature ("k8s-api"), a feature with a
// version constraint ("juju >= 3.1", "juju < 4"), or a composite
// {"any-of": [...]} / {"all-of": [...]} of expressions (Juju's grammar,
// charm/assumes). Meta.Assumes keeps the list normalised ("name op
// version", single spaces; composites as one-key maps), which is also the
// JSON form of Juju's ExpressionTree that CharmInfo sends as
// meta.assumes-expr.

var (
	assumesFeature    = regexp.MustCompile(`^[a-z][a-z0-9-]*?[a-z0-9]+$`)
	assumesConstraint = regexp.MustCompile(`^([a-z][a-z0-9-]*?[a-z0-9]+)\s*(>=|<)\s*(\d{1,9}(?:\.\d{1,9}){0,3})$`)
)

// assumesMaxDepth bounds the nesting of composite expressions.
const assumesMaxDepth = 16

func assumes(n *yaml.Node) ([]any, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n, `malformed "assumes" block; expected an expression list`)
	}
	return assumesList(n, "assumes", 0)
}

func assumesList(n *yaml.Node, what string, depth int) ([]any, error) {
	out := make([]any, 0, len(n.Content))
	for i, e := range n.Content {
		x, err := assumesExpr(e, depth)
		if err != nil {
			return nil, errAt(e, "%s expression %d: %s", what, i+1, err.(*ParseError).Msg)
		}
		out = append(out, x)
	}
	return out, nil
}

func assumesExpr(n *yaml.Node, depth int) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		s := strings.TrimSpace(n.Value)
		if assumesFeature.MatchString(s) {
			return s, nil
		}
		if m := assumesConstraint.FindStringSubmatch(s); m != nil {
			return fmt.Sprintf("%s %s %s", m[1], m[2], m[3]), nil
		}
		return nil, errAt(n, "malformed feature expression %q", n.Value)
	case yaml.MappingNode:
		if len(n.Content) != 2 || (n.Content[0].Value != "any-of" && n.Content[0].Value != "all-of") {
			return nil, errAt(n, `malformed composite expression; expected an "any-of" or "all-of" block`)
		}
		op, list := n.Content[0].Value, n.Content[1]
		if list.Kind != yaml.SequenceNode {
			return nil, errAt(list, "malformed %q expression; expected a list of sub-expressions", op)
		}
		if depth >= assumesMaxDepth {
			return nil, errAt(n, "composite expressions nested deeper than %d", assumesMaxDepth)
		}
		sub, err := assumesList(list, fmt.Sprintf("%q", op), depth+1)
		if err != nil {
			return nil, &ParseError{Msg: err.(*ParseError).Msg}
		}
		return map[string]any{op: sub}, nil
	}
	return nil, errAt(n, `expected a feature, "any-of" or "all-of" expression`)
}
