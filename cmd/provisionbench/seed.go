package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state"
)

// The CAAS model a self-started daemon is seeded with, for the write
// workload.

// caasModelName is the CAAS model a self-started daemon is seeded with,
// holding applications bench-w0 ... for the write workload.
const caasModelName = "bench-k8s"

// benchApp is the name of seeded application i (Juju's application names
// need a letter in each hyphenated part).
func benchApp(i int) string { return "bench-w" + strconv.Itoa(i) }

// seedCAAS makes the CAAS model and its applications benchApp(0) ... benchApp(n-1)
// (those missing), for UpdateApplicationsUnits writers.
func seedCAAS(st *state.State, n int) (string, error) {
	m, err := st.ModelByName(context.Background(), caasModelName)
	if err != nil {
		m, err = st.AddModel(context.Background(), caasModelName, state.ModelTypeCAAS,
			map[string]any{"agent-version": daemon.ServerVersion, "workload-storage": "kubernetes"})
		if err != nil {
			return "", fmt.Errorf("seed CAAS model: %w", err)
		}
	}
	for i := range n {
		name := benchApp(i)
		if _, err := st.Application(context.Background(), m.UUID, name); err == nil {
			continue
		}
		_, err := st.AddCAASApplication(context.Background(), m.UUID, state.CAASApplicationParams{
			Name:  name,
			Charm: state.Charm{URL: "ch:bench-1", Revision: 1, Meta: &charm.Meta{Name: "bench"}},
			Scale: 1,
		})
		if err != nil {
			return "", fmt.Errorf("seed application %s: %w", name, err)
		}
	}
	return m.UUID, nil
}
