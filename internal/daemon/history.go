package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/provisiond/provisiond/internal/singular"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
)

// The history's retention (docs/history.md). Config.HistoryRetention (a
// reload changes it) says how much of the history of commits is kept. On
// bbolt the history pruner, one of the controller's singular workers,
// deletes the records that fall outside it, in batches of
// historyPruneBatch commits (each its own short bbolt transaction), every
// historyPruneEvery; on etcd it deletes the archive's batches that do
// (the compactor, cluster.go, archives the records from the feed key's
// history before it compacts). Either way the history's size and oldest
// revision are in /metrics and show-controller.

const (
	historyPruneEvery = time.Minute
	historyPruneBatch = 1000
	// historyStatsAge is how long the figures of the history are reused
	// (each scrape and show-controller would otherwise read them).
	historyStatsAge = 15 * time.Second
)

// historyPruner is what boltstore offers for pruning the history.
type historyPruner interface {
	PruneHistory(ctx context.Context, r store.Retention, now time.Time, max int) (int, error)
}

// history holds the daemon's retention and the figures of the history.
type history struct {
	retention atomic.Pointer[store.Retention]
	pruned    prometheus.Counter

	mu      sync.Mutex // guards the figures below
	stats   store.HistoryStats
	statsAt time.Time
	err     error
}

func (h *history) setRetention(r store.Retention) {
	if r == (store.Retention{}) {
		r = store.DefaultRetention
	}
	h.retention.Store(&r)
}

// Retention is the history's retention now.
func (h *history) Retention() store.Retention { return *h.retention.Load() }

// HistoryRetention is the daemon's history retention now, as
// --history-retention reads it.
func (d *Daemon) HistoryRetention() string { return d.history.Retention().String() }

// historyStats returns the figures of the history, read at most every
// historyStatsAge.
func (d *Daemon) historyStats(ctx context.Context) (store.HistoryStats, error) {
	h, ok := d.state.Store().(store.Historian)
	if !ok {
		return store.HistoryStats{}, nil
	}
	d.history.mu.Lock()
	defer d.history.mu.Unlock()
	if time.Since(d.history.statsAt) < historyStatsAge {
		return d.history.stats, d.history.err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d.history.stats, d.history.err = h.HistoryStats(ctx)
	d.history.statsAt = time.Now()
	return d.history.stats, d.history.err
}

// startHistory registers the history's metrics and returns the singular
// worker that prunes it (none when the store prunes by compaction).
func (d *Daemon) startHistory() []singular.Worker {
	d.history.pruned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "provisiond_history_pruned_total",
		Help: "History records this daemon pruned as they fell outside --history-retention.",
	})
	gauge := func(name, help string, f func(store.HistoryStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			st, err := d.historyStats(context.Background())
			if err != nil {
				return 0
			}
			return f(st)
		})
	}
	d.metrics.reg.MustRegister(d.history.pruned,
		gauge("provisiond_history_oldest_revision", "The oldest revision whose history is kept (0: none).",
			func(st store.HistoryStats) float64 { return float64(st.Oldest) }),
		gauge("provisiond_history_oldest_timestamp_seconds", "The time of the oldest commit whose history is kept, Unix seconds (0: none).",
			func(st store.HistoryStats) float64 {
				if st.OldestTime.IsZero() {
					return 0
				}
				return float64(st.OldestTime.UnixNano()) / 1e9
			}),
		gauge("provisiond_history_records", "History records kept (on etcd: those archived; the newest, up to two compaction intervals of them, are not yet).",
			func(st store.HistoryStats) float64 { return float64(st.Records) }),
		gauge("provisiond_history_size_bytes", "Bytes the history records take (bbolt: its pages in use; etcd: the archive's values).",
			func(st store.HistoryStats) float64 { return float64(st.Bytes) }),
	)
	resumed := func(name, help string, f func(state.ResumeStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(d.state.ResumeStats())) })
	}
	d.metrics.reg.MustRegister(
		resumed("provisiond_history_resumes_total", "Watchers opened resumed after a revision that replayed the history after it (one per watcher of a bulk Watch call).",
			func(s state.ResumeStats) uint64 { return s.Replays }),
		resumed("provisiond_history_resumes_shared_total", "Of provisiond_history_resumes_total, those replayed from the recent history the daemon holds for them (no read of the store).",
			func(s state.ResumeStats) uint64 { return s.Shared }),
		resumed("provisiond_history_reads_total", "Reads of the store's history made for resumed watchers (a range of records, paged on etcd, or the oldest point kept).",
			func(s state.ResumeStats) uint64 { return s.Reads }),
		resumed("provisiond_history_reads_recent_total", "Reads of the newest commits for resumed watchers served from the history records this daemon's change feed brought (etcd), instead of a read of the store.",
			func(s state.ResumeStats) uint64 { return s.Recent }),
		resumed("provisiond_history_read_records_total", "History records read from the store for resumed watchers.",
			func(s state.ResumeStats) uint64 { return s.Records }),
		resumed("provisiond_history_read_bytes_total", "Bytes of the history records read from the store for resumed watchers (their keys and values).",
			func(s state.ResumeStats) uint64 { return s.Bytes }),
	)
	p, ok := d.state.Store().(historyPruner)
	if !ok {
		return nil
	}
	return []singular.Worker{{Name: "history-pruner", Run: func(ctx context.Context) error {
		t := time.NewTicker(historyPruneEvery)
		defer t.Stop()
		for {
			if err := d.pruneHistory(ctx, p); err != nil && ctx.Err() == nil {
				d.log.Warn("pruning the history", "err", err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}}}
}

// pruneHistory prunes what falls outside the retention, batch after batch
// (each one short commit, so writers wait for none for long).
func (d *Daemon) pruneHistory(ctx context.Context, p historyPruner) error {
	for ctx.Err() == nil {
		n, err := p.PruneHistory(ctx, d.history.Retention(), time.Now(), historyPruneBatch)
		if err != nil {
			return err
		}
		d.history.pruned.Add(float64(n))
		if n < historyPruneBatch {
			return nil
		}
	}
	return nil
}
