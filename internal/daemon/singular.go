package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/provisiond/provisiond/internal/singular"
	"github.com/provisiond/provisiond/internal/undertaker"
	"github.com/provisiond/provisiond/state"
)

// SingularElection is the store election under which one daemon of a
// controller runs the controller's singular workers (package singular).
const SingularElection = "singular"

// startSingular starts campaigning for the controller's singular workers:
// the machine undertaker and, on bbolt, the history pruner (history.go). Whichever daemon leads runs them; on bbolt, this
// one at once.
func (d *Daemon) startSingular() {
	leading := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "provisiond_singular_leading",
		Help: "1 while this daemon runs the controller's singular workers (the machine undertaker): one daemon of a controller at a time.",
	})
	removals := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "provisiond_machine_removals_total",
		Help: "Machines marked for removal that the built-in machine undertaker removed on this daemon.",
	})
	d.metrics.reg.MustRegister(leading, removals)
	u := undertaker.New(undertaker.Config{
		State:     d.state,
		Environ:   d.environ,
		Logger:    d.log.With("worker", "machine-undertaker"),
		OnRemoved: func(string, state.MachineRemoval) { removals.Inc() },
	})
	d.singular = singular.Start(singular.Config{
		Elector:  d.state.Store(),
		Election: SingularElection,
		Logger:   d.log,
		Workers:  append([]singular.Worker{{Name: "machine-undertaker", Run: u.Run}}, d.startHistory()...),
		OnLead: func(l bool) {
			if l {
				leading.Set(1)
			} else {
				leading.Set(0)
			}
		},
	})
}

// SingularLeading reports whether this daemon runs the controller's
// singular workers now (tests).
func (d *Daemon) SingularLeading() bool { return d.singular != nil && d.singular.Leading() }
