// Package charm reads a charm's metadata.yaml into Meta: what provisiond
// needs of a charm to deploy and provision it (storage, devices,
// deployment, containers, relations, resources). It imports nothing of
// provisiond's. Parse errors give the line of metadata.yaml they are about:
// `metadata.yaml line 7: storage "data": unknown type "tape"`.
package charm

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/provisiond/provisiond/size"
)

// Storage kinds of charm storage.
const (
	StorageBlock      = "block"
	StorageFilesystem = "filesystem"
)

// Deployment modes and types.
const (
	ModeWorkload = "workload"
	ModeOperator = "operator"

	DeploymentStateless = "stateless"
	DeploymentStateful  = "stateful"
	DeploymentDaemon    = "daemon"

	ServiceCluster      = "cluster"
	ServiceLoadBalancer = "loadbalancer"
	ServiceExternal     = "external"
	ServiceOmit         = "omit"
)

// Meta is a charm's metadata. The JSON keys are those of the wire's
// CharmMeta, so state keeps it as it is.
type Meta struct {
	Name           string                  `json:"name"`
	Summary        string                  `json:"summary"`
	Description    string                  `json:"description"`
	Subordinate    bool                    `json:"subordinate"`
	Provides       map[string]Relation     `json:"provides,omitempty"`
	Requires       map[string]Relation     `json:"requires,omitempty"`
	Peers          map[string]Relation     `json:"peers,omitempty"`
	ExtraBindings  map[string]string       `json:"extra-bindings,omitempty"`
	Categories     []string                `json:"categories,omitempty"`
	Tags           []string                `json:"tags,omitempty"`
	Series         []string                `json:"series,omitempty"`
	Storage        map[string]Storage      `json:"storage,omitempty"`
	Deployment     *Deployment             `json:"deployment,omitempty"`
	Devices        map[string]Device       `json:"devices,omitempty"`
	PayloadClasses map[string]PayloadClass `json:"payload-classes,omitempty"`
	Resources      map[string]Resource     `json:"resources,omitempty"`
	Terms          []string                `json:"terms,omitempty"`
	MinJujuVersion string                  `json:"min-juju-version,omitempty"`
	Containers     map[string]Container    `json:"containers,omitempty"`
	// Assumes is the assumes block, normalised (assumes.go).
	Assumes []any `json:"assumes,omitempty"`
}

// Relation is one endpoint of provides, requires or peers.
type Relation struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Interface string `json:"interface"`
	Optional  bool   `json:"optional"`
	Limit     int    `json:"limit"`
	Scope     string `json:"scope"`
}

// Storage is one entry of the charm's storage.
type Storage struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Type        string   `json:"type"` // StorageBlock or StorageFilesystem
	Shared      bool     `json:"shared"`
	ReadOnly    bool     `json:"read-only"`
	CountMin    int      `json:"count-min"`
	CountMax    int      `json:"count-max"` // -1: no maximum
	MinimumSize uint64   `json:"minimum-size"`
	Location    string   `json:"location,omitempty"`
	Properties  []string `json:"properties,omitempty"`
}

// Deployment is a Kubernetes charm's deployment block.
type Deployment struct {
	Type       string `json:"type"`
	Mode       string `json:"mode"`
	Service    string `json:"service"`
	MinVersion string `json:"min-version"`
}

// Device is a device a charm asks for. The keys are capitalised, as on
// the wire.
type Device struct {
	Name        string `json:"Name"`
	Description string `json:"Description"`
	Type        string `json:"Type"`
	CountMin    int64  `json:"CountMin"`
	CountMax    int64  `json:"CountMax"`
}

// PayloadClass is a payload the charm declares.
type PayloadClass struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Resource is a resource the charm declares.
type Resource struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Path        string `json:"path"`
	Description string `json:"description"`
}

// Container is a sidecar container of the charm's pod.
type Container struct {
	Resource string  `json:"resource,omitempty"`
	Mounts   []Mount `json:"mounts,omitempty"`
}

// Mount mounts charm storage into a container.
type Mount struct {
	Storage  string `json:"storage,omitempty"`
	Location string `json:"location,omitempty"`
}

// DeploymentMode is the charm's deployment mode, ModeWorkload when it
// sets none.
func (m *Meta) DeploymentMode() string {
	if m == nil || m.Deployment == nil || m.Deployment.Mode == "" {
		return ModeWorkload
	}
	return m.Deployment.Mode
}

// ParseError is a metadata.yaml error at a line (0: unknown).
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("metadata.yaml line %d: %s", e.Line, e.Msg)
	}
	return "metadata.yaml: " + e.Msg
}

func errAt(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

var (
	validName    = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]*[a-z][a-z0-9]*)*$`)
	validStorage = regexp.MustCompile(`^[a-z][a-z0-9]*([-_][a-z0-9]+)*$`)
	countRange   = regexp.MustCompile(`^(\d+)(?:(-)(\d+)?)?$`)
	// jujuVersion is Juju's version number grammar (major.minor.patch,
	// major.minor-tagpatch, an optional .build): Juju refuses any other
	// min-juju-version, and its agents parse the one CharmInfo sends.
	jujuVersion = regexp.MustCompile(`^\d{1,9}\.\d{1,9}(?:\.|-[a-z]+)\d{1,9}(?:\.\d{1,9})?$`)
)

// ParseMeta reads metadata.yaml. A name is required; unknown top-level
// keys are ignored, as Juju ignores them.
func ParseMeta(data []byte) (*Meta, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &ParseError{Msg: "empty metadata"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errAt(root, "metadata is not a mapping")
	}
	m := &Meta{}
	var nameNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		var err error
		switch k.Value {
		case "name":
			nameNode = v
			err = scalar(v, &m.Name)
		case "summary":
			err = scalar(v, &m.Summary)
		case "description":
			err = scalar(v, &m.Description)
		case "subordinate":
			err = decode(v, &m.Subordinate, "subordinate")
		case "provides":
			m.Provides, err = relations(v, "provides", "provider")
		case "requires":
			m.Requires, err = relations(v, "requires", "requirer")
		case "peers":
			m.Peers, err = relations(v, "peers", "peer")
		case "extra-bindings":
			m.ExtraBindings, err = extraBindings(v)
		case "categories":
			err = decode(v, &m.Categories, "categories")
		case "tags":
			err = decode(v, &m.Tags, "tags")
		case "series":
			err = decode(v, &m.Series, "series")
		case "terms":
			err = decode(v, &m.Terms, "terms")
		case "min-juju-version":
			if err = scalar(v, &m.MinJujuVersion); err == nil && !jujuVersion.MatchString(m.MinJujuVersion) {
				err = errAt(v, "invalid min-juju-version %q: want a version such as 3.1.0", m.MinJujuVersion)
			}
		case "storage":
			m.Storage, err = storageMap(v)
		case "deployment":
			m.Deployment, err = deployment(v)
		case "devices":
			m.Devices, err = devices(v)
		case "payloads":
			m.PayloadClasses, err = payloads(v)
		case "resources":
			m.Resources, err = resources(v)
		case "containers":
			m.Containers, err = containers(v)
		case "assumes":
			m.Assumes, err = assumes(v)
		}
		if err != nil {
			return nil, err
		}
	}
	if m.Name == "" {
		return nil, errAt(root, "charm name is missing")
	}
	if !validName.MatchString(m.Name) {
		return nil, errAt(nameNode, "invalid charm name %q", m.Name)
	}
	for name, c := range m.Containers {
		for _, mt := range c.Mounts {
			if _, ok := m.Storage[mt.Storage]; !ok {
				return nil, errAt(findKey(root, "containers"), "container %q mounts unknown storage %q", name, mt.Storage)
			}
		}
	}
	return m, nil
}

// yamlError keeps the line of a YAML syntax or type error.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, convErr := strconv.Atoi(rest[:i]); convErr == nil {
				return &ParseError{Line: n, Msg: strings.TrimSpace(rest[i+1:])}
			}
		}
	}
	return &ParseError{Msg: msg}
}

func findKey(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return m
}

func scalar(n *yaml.Node, out *string) error {
	if n.Kind != yaml.ScalarNode {
		return errAt(n, "expected a string")
	}
	*out = n.Value
	return nil
}

func decode(n *yaml.Node, out any, what string) error {
	if err := n.Decode(out); err != nil {
		return errAt(n, "%s: %s", what, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

// pairs iterates a mapping node.
func pairs(n *yaml.Node, what string, fn func(k, v *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return errAt(n, "%s: expected a mapping", what)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := fn(n.Content[i], n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func relations(n *yaml.Node, what, role string) (map[string]Relation, error) {
	out := map[string]Relation{}
	err := pairs(n, what, func(k, v *yaml.Node) error {
		r := Relation{Name: k.Value, Role: role, Scope: "global"}
		if v.Kind == yaml.ScalarNode {
			r.Interface = v.Value
		} else {
			var raw struct {
				Interface string `yaml:"interface"`
				Optional  bool   `yaml:"optional"`
				Limit     int    `yaml:"limit"`
				Scope     string `yaml:"scope"`
			}
			if err := decode(v, &raw, fmt.Sprintf("%s %q", what, k.Value)); err != nil {
				return err
			}
			r.Interface, r.Optional, r.Limit = raw.Interface, raw.Optional, raw.Limit
			if raw.Scope != "" {
				if raw.Scope != "global" && raw.Scope != "container" {
					return errAt(v, "%s %q: invalid scope %q", what, k.Value, raw.Scope)
				}
				r.Scope = raw.Scope
			}
		}
		if r.Interface == "" {
			return errAt(v, "%s %q: missing interface", what, k.Value)
		}
		if role == "peer" && r.Limit == 0 {
			r.Limit = 1
		}
		out[k.Value] = r
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

func extraBindings(n *yaml.Node) (map[string]string, error) {
	out := map[string]string{}
	if n.Kind == yaml.SequenceNode {
		for _, e := range n.Content {
			out[e.Value] = e.Value
		}
		return out, nil
	}
	err := pairs(n, "extra-bindings", func(k, _ *yaml.Node) error {
		out[k.Value] = k.Value
		return nil
	})
	return out, err
}

func storageMap(n *yaml.Node) (map[string]Storage, error) {
	out := map[string]Storage{}
	err := pairs(n, "storage", func(k, v *yaml.Node) error {
		name := k.Value
		if !validStorage.MatchString(name) {
			return errAt(k, "invalid storage name %q", name)
		}
		var raw struct {
			Type        string   `yaml:"type"`
			Description string   `yaml:"description"`
			Shared      bool     `yaml:"shared"`
			ReadOnly    bool     `yaml:"read-only"`
			Location    string   `yaml:"location"`
			MinimumSize string   `yaml:"minimum-size"`
			Properties  []string `yaml:"properties"`
			Multiple    *struct {
				Range string `yaml:"range"`
			} `yaml:"multiple"`
		}
		if err := decode(v, &raw, fmt.Sprintf("storage %q", name)); err != nil {
			return err
		}
		s := Storage{Name: name, Type: raw.Type, Description: raw.Description, Shared: raw.Shared,
			ReadOnly: raw.ReadOnly, Location: raw.Location, Properties: raw.Properties, CountMin: 1, CountMax: 1}
		switch raw.Type {
		case StorageBlock, StorageFilesystem:
		case "":
			return errAt(v, "storage %q: missing type", name)
		default:
			return errAt(findKey(v, "type"), "storage %q: unknown type %q", name, raw.Type)
		}
		if raw.Type == StorageBlock && raw.Location != "" {
			return errAt(findKey(v, "location"), "storage %q: location may not be specified for \"type: block\"", name)
		}
		if raw.MinimumSize != "" {
			mib, err := size.ParseMiB(strings.TrimSpace(raw.MinimumSize))
			if err != nil {
				return errAt(findKey(v, "minimum-size"), "storage %q: %v", name, err)
			}
			s.MinimumSize = mib
		}
		for _, p := range raw.Properties {
			if p != "transient" {
				return errAt(findKey(v, "properties"), "storage %q: unknown property %q", name, p)
			}
		}
		if raw.Multiple != nil {
			r := countRange.FindStringSubmatch(raw.Multiple.Range)
			if r == nil {
				return errAt(findKey(v, "multiple"), "storage %q: invalid range %q", name, raw.Multiple.Range)
			}
			s.CountMin, _ = strconv.Atoi(r[1])
			switch {
			case r[2] == "":
				s.CountMax = s.CountMin
			case r[3] == "":
				s.CountMax = -1
			default:
				s.CountMax, _ = strconv.Atoi(r[3])
				if s.CountMax < s.CountMin {
					return errAt(findKey(v, "multiple"), "storage %q: invalid range %q", name, raw.Multiple.Range)
				}
			}
		}
		out[name] = s
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

func deployment(n *yaml.Node) (*Deployment, error) {
	var raw struct {
		Type       string `yaml:"type"`
		Mode       string `yaml:"mode"`
		Service    string `yaml:"service"`
		MinVersion string `yaml:"min-version"`
	}
	if err := decode(n, &raw, "deployment"); err != nil {
		return nil, err
	}
	d := Deployment(raw)
	check := func(key, v string, ok ...string) error {
		if v != "" && !slices.Contains(ok, v) {
			return errAt(findKey(n, key), "deployment: invalid %s %q", key, v)
		}
		return nil
	}
	if err := check("type", d.Type, DeploymentStateless, DeploymentStateful, DeploymentDaemon); err != nil {
		return nil, err
	}
	if err := check("mode", d.Mode, ModeWorkload, ModeOperator); err != nil {
		return nil, err
	}
	if err := check("service", d.Service, ServiceCluster, ServiceLoadBalancer, ServiceExternal, ServiceOmit); err != nil {
		return nil, err
	}
	return &d, nil
}

func devices(n *yaml.Node) (map[string]Device, error) {
	out := map[string]Device{}
	err := pairs(n, "devices", func(k, v *yaml.Node) error {
		var raw struct {
			Type        string `yaml:"type"`
			Description string `yaml:"description"`
			CountMin    *int64 `yaml:"countmin"`
			CountMax    *int64 `yaml:"countmax"`
		}
		if err := decode(v, &raw, fmt.Sprintf("device %q", k.Value)); err != nil {
			return err
		}
		if raw.Type == "" {
			return errAt(v, "device %q: missing type", k.Value)
		}
		d := Device{Name: k.Value, Type: raw.Type, Description: raw.Description, CountMin: 1, CountMax: 1}
		if raw.CountMin != nil {
			d.CountMin = *raw.CountMin
		}
		if raw.CountMax != nil {
			d.CountMax = *raw.CountMax
		}
		if d.CountMin < 0 || d.CountMax < d.CountMin {
			return errAt(v, "device %q: invalid count range %d-%d", k.Value, d.CountMin, d.CountMax)
		}
		out[k.Value] = d
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

func payloads(n *yaml.Node) (map[string]PayloadClass, error) {
	out := map[string]PayloadClass{}
	err := pairs(n, "payloads", func(k, v *yaml.Node) error {
		var raw struct {
			Type string `yaml:"type"`
		}
		if err := decode(v, &raw, fmt.Sprintf("payload %q", k.Value)); err != nil {
			return err
		}
		out[k.Value] = PayloadClass{Name: k.Value, Type: raw.Type}
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

func resources(n *yaml.Node) (map[string]Resource, error) {
	out := map[string]Resource{}
	err := pairs(n, "resources", func(k, v *yaml.Node) error {
		var raw struct {
			Type        string `yaml:"type"`
			Filename    string `yaml:"filename"`
			Description string `yaml:"description"`
		}
		if err := decode(v, &raw, fmt.Sprintf("resource %q", k.Value)); err != nil {
			return err
		}
		if raw.Type == "" {
			raw.Type = "file"
		}
		if raw.Type != "file" && raw.Type != "oci-image" {
			return errAt(findKey(v, "type"), "resource %q: unknown type %q", k.Value, raw.Type)
		}
		out[k.Value] = Resource{Name: k.Value, Type: raw.Type, Path: raw.Filename, Description: raw.Description}
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

func containers(n *yaml.Node) (map[string]Container, error) {
	out := map[string]Container{}
	err := pairs(n, "containers", func(k, v *yaml.Node) error {
		var c Container
		if !isNull(v) {
			if err := decode(v, &c, fmt.Sprintf("container %q", k.Value)); err != nil {
				return err
			}
		}
		for _, mt := range c.Mounts {
			if mt.Storage == "" {
				return errAt(v, "container %q: mount without storage", k.Value)
			}
		}
		out[k.Value] = c
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}
