package charm

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const gitlab = `
name: gitlab
summary: GitLab
description: |
  A git forge.
provides:
  http: http
requires:
  db:
    interface: mysql
    limit: 1
peers:
  cluster:
    interface: gitlab-peer
storage:
  data:
    type: filesystem
    location: /var/opt/gitlab
    minimum-size: 2G
  logs:
    type: filesystem
    multiple:
      range: 0-
  cache:
    type: block
    read-only: true
    multiple:
      range: "2"
deployment:
  type: stateful
  service: loadbalancer
devices:
  gpu:
    type: nvidia.com/gpu
    countmin: 1
    countmax: 2
resources:
  image:
    type: oci-image
containers:
  gitlab:
    resource: image
    mounts:
      - storage: data
        location: /data
`

func TestParseMeta(t *testing.T) {
	m, err := ParseMeta([]byte(gitlab))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "gitlab" || m.Summary != "GitLab" || m.Description != "A git forge.\n" {
		t.Errorf("header = %q %q %q", m.Name, m.Summary, m.Description)
	}
	wantStorage := map[string]Storage{
		"data":  {Name: "data", Type: "filesystem", Location: "/var/opt/gitlab", MinimumSize: 2048, CountMin: 1, CountMax: 1},
		"logs":  {Name: "logs", Type: "filesystem", CountMin: 0, CountMax: -1},
		"cache": {Name: "cache", Type: "block", ReadOnly: true, CountMin: 2, CountMax: 2},
	}
	if !reflect.DeepEqual(m.Storage, wantStorage) {
		t.Errorf("storage = %+v", m.Storage)
	}
	if *m.Deployment != (Deployment{Type: "stateful", Service: "loadbalancer"}) || m.DeploymentMode() != ModeWorkload {
		t.Errorf("deployment = %+v, mode %q", m.Deployment, m.DeploymentMode())
	}
	if m.Devices["gpu"] != (Device{Name: "gpu", Type: "nvidia.com/gpu", CountMin: 1, CountMax: 2}) {
		t.Errorf("devices = %+v", m.Devices)
	}
	if m.Provides["http"] != (Relation{Name: "http", Role: "provider", Interface: "http", Scope: "global"}) ||
		m.Requires["db"].Limit != 1 || m.Peers["cluster"].Limit != 1 {
		t.Errorf("relations = %+v %+v %+v", m.Provides, m.Requires, m.Peers)
	}
	if m.Resources["image"].Type != "oci-image" {
		t.Errorf("resources = %+v", m.Resources)
	}
	if c := m.Containers["gitlab"]; c.Resource != "image" || len(c.Mounts) != 1 || c.Mounts[0] != (Mount{Storage: "data", Location: "/data"}) {
		t.Errorf("containers = %+v", m.Containers)
	}
}

func TestParseMetaMinimal(t *testing.T) {
	m, err := ParseMeta([]byte("name: mini\ndeployment:\n  mode: operator\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Storage != nil || m.Devices != nil || m.DeploymentMode() != ModeOperator {
		t.Errorf("meta = %+v", m)
	}
	var nilMeta *Meta
	if nilMeta.DeploymentMode() != ModeWorkload {
		t.Error("nil meta mode")
	}
}

func TestParseMetaErrors(t *testing.T) {
	tests := []struct {
		name, yaml, err string
	}{
		{"syntax", "name: a\n  bad: [", "metadata.yaml line 2: mapping values are not allowed in this context"},
		{"no name", "summary: x\n", "metadata.yaml line 1: charm name is missing"},
		{"bad name", "summary: x\nname: Bad_Name\n", `metadata.yaml line 2: invalid charm name "Bad_Name"`},
		{"not a mapping", "- a\n", "metadata.yaml line 1: metadata is not a mapping"},
		{"empty", "", "metadata.yaml: empty metadata"},
		{"storage type", "name: a\nstorage:\n  data:\n    type: tape\n", `metadata.yaml line 4: storage "data": unknown type "tape"`},
		{"storage no type", "name: a\nstorage:\n  data:\n    location: /x\n", `metadata.yaml line 4: storage "data": missing type`},
		{"storage range", "name: a\nstorage:\n  data:\n    type: block\n    multiple:\n      range: 3-1\n", `metadata.yaml line 5: storage "data": invalid range "3-1"`},
		{"storage size", "name: a\nstorage:\n  data:\n    type: filesystem\n    minimum-size: lots\n", `metadata.yaml line 5: storage "data": size "lots": not a number; want a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB`},
		{"block location", "name: a\nstorage:\n  d:\n    type: block\n    location: /x\n", `metadata.yaml line 5: storage "d": location may not be specified for "type: block"`},
		{"storage name", "name: a\nstorage:\n  Data:\n    type: block\n", `metadata.yaml line 3: invalid storage name "Data"`},
		{"deployment type", "name: a\ndeployment:\n  type: sometimes\n", `metadata.yaml line 3: deployment: invalid type "sometimes"`},
		{"deployment service", "name: a\ndeployment:\n  service: nodeport\n", `metadata.yaml line 3: deployment: invalid service "nodeport"`},
		{"device type", "name: a\ndevices:\n  gpu:\n    countmin: 1\n", `metadata.yaml line 4: device "gpu": missing type`},
		{"device counts", "name: a\ndevices:\n  gpu:\n    type: x\n    countmin: 3\n    countmax: 1\n", `metadata.yaml line 4: device "gpu": invalid count range 3-1`},
		{"relation interface", "name: a\nprovides:\n  http: {}\n", `metadata.yaml line 3: provides "http": missing interface`},
		{"relation scope", "name: a\nrequires:\n  j:\n    interface: juju-info\n    scope: local\n", `metadata.yaml line 4: requires "j": invalid scope "local"`},
		{"mount unknown storage", "name: a\ncontainers:\n  c:\n    mounts:\n      - storage: nope\n", `metadata.yaml line 2: container "c" mounts unknown storage "nope"`},
		{"storage not a map", "name: a\nstorage: [1]\n", "metadata.yaml line 2: storage: expected a mapping"},
		{"resource type", "name: a\nresources:\n  r:\n    type: tarball\n", `metadata.yaml line 4: resource "r": unknown type "tarball"`},
		{"min-juju-version", "name: a\nmin-juju-version: \"2.9\"\n", `metadata.yaml line 2: invalid min-juju-version "2.9": want a version such as 3.1.0`},
		{"bad subordinate", "name: a\nsubordinate: maybe\n", "metadata.yaml line 2: subordinate: unmarshal errors:\n  line 2: cannot unmarshal !!str `maybe` into bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMeta([]byte(tt.yaml))
			if err == nil || err.Error() != tt.err {
				t.Fatalf("err = %v\nwant %s", err, tt.err)
			}
		})
	}
}

// minimum-size is read by package size (1G, 1GiB and 1024M alike).
func TestMinimumSize(t *testing.T) {
	for in, want := range map[string]uint64{"512": 512, "512M": 512, "1G": 1024, "1.5G": 1536, "2GiB": 2048, "1T": 1 << 20, " 1G ": 1024} {
		m, err := ParseMeta([]byte("name: x\nstorage:\n  d:\n    type: filesystem\n    minimum-size: \"" + in + "\"\n"))
		if err != nil || m.Storage["d"].MinimumSize != want {
			t.Errorf("minimum-size %q: %v; want %d", in, err, want)
		}
	}
	if _, err := ParseMeta([]byte("name: x\nstorage:\n  d:\n    type: filesystem\n    minimum-size: 1X\n")); err == nil ||
		!strings.Contains(err.Error(), `unknown unit "X"`) {
		t.Errorf("minimum-size 1X: %v", err)
	}
}

// FuzzParseMeta: no metadata.yaml makes the parser panic or hang; a
// success has a name and encodes as JSON (what CharmInfo sends); a failure
// is a *ParseError.
func FuzzParseMeta(f *testing.F) {
	for _, s := range []string{
		gitlab, "name: x\n", "", "name:\n", "- a\n", "name: [1]\n", "name: x\nstorage: 3\n",
		"name: x\nstorage:\n  d:\n    type: filesystem\n    minimum-size: 99999999999999999999999G\n",
		"name: x\nrequires:\n  db: {interface: mysql, limit: -1}\n", "name: x\ndevices:\n  g: {type: gpu, countmin: 3, countmax: 1}\n",
		"name: x\ncontainers:\n  c:\n    mounts: [{storage: nope}]\n", "name: &a x\nsummary: *a\n",
		"a: &a [*a, *a]\n", // a recursive alias
		"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\nname: bomb\n",
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000), "name: \"\\xff\"\n", "name: x\n\tbad: tab\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeta(data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Msg == "" {
				t.Fatalf("error %T %v; want a *ParseError with a message", err, err)
			}
			return
		}
		if m.Name == "" {
			t.Fatal("parsed without a name")
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("parsed metadata does not encode: %v", err)
		}
	})
}
