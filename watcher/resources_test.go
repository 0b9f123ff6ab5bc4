package watcher_test

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// orderLog records names in the order they come: fakeStoppers stopping,
// sinks called and deferred work run (hub_test.go).
type orderLog struct {
	mu    sync.Mutex
	names []string
}

func (l *orderLog) add(name string) {
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

func (l *orderLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.names)
}

// fakeStopper is a Stopper that counts its stops.
type fakeStopper struct {
	name  string
	log   *orderLog // may be nil
	err   error
	stops atomic.Int32
}

func (s *fakeStopper) Stop() error {
	s.stops.Add(1)
	if s.log != nil {
		s.log.add(s.name)
	}
	return s.err
}

func (s *fakeStopper) assertStops(t *testing.T, want int32) {
	t.Helper()
	if got := s.stops.Load(); got != want {
		t.Errorf("stopper %q stopped %d times, want %d", s.name, got, want)
	}
}

func register(t *testing.T, r *watcher.Resources, s watcher.Stopper, wantID string) {
	t.Helper()
	id, err := r.Register(s)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if id != wantID {
		t.Fatalf("Register = %q, want %q", id, wantID)
	}
}

func TestResourcesIDsAreNeverReused(t *testing.T) {
	t.Parallel()
	r := watcher.NewResources(0)
	s := make([]*fakeStopper, 6)
	for i := range s {
		s[i] = &fakeStopper{name: strconv.Itoa(i + 1)}
	}
	register(t, r, s[0], "1")
	register(t, r, s[1], "2")
	register(t, r, s[2], "3")
	if err := r.Stop("3"); err != nil { // the newest: a reusing counter would hand "3" out again
		t.Fatalf("Stop(3): %v", err)
	}
	if err := r.Stop("1"); err != nil {
		t.Fatalf("Stop(1): %v", err)
	}
	register(t, r, s[3], "4")
	register(t, r, s[4], "5")
	if got := r.Len(); got != 3 {
		t.Errorf("Len() = %d, want 3", got)
	}
	for id, want := range map[string]*fakeStopper{"2": s[1], "4": s[3], "5": s[4]} {
		got, err := r.Get(id)
		if err != nil || got != want {
			t.Errorf("Get(%q) = %v, %v; want %v, nil", id, got, err, want)
		}
	}
	s[0].assertStops(t, 1)
	s[1].assertStops(t, 0)
	s[2].assertStops(t, 1)
}

func TestResourcesUnknownID(t *testing.T) {
	t.Parallel()
	r := watcher.NewResources(0)
	held := &fakeStopper{name: "held"}
	gone := &fakeStopper{name: "gone"}
	register(t, r, held, "1")
	register(t, r, gone, "2")
	if err := r.Stop("2"); err != nil {
		t.Fatalf("Stop(2): %v", err)
	}
	for _, id := range []string{"", "0", "2", "3", "01", " 1", "+1", "1 ", "x", "-1", "18446744073709551616"} {
		t.Run("Get("+strconv.Quote(id)+")", func(t *testing.T) {
			if s, err := r.Get(id); !errors.Is(err, watcher.ErrUnknownResource) || s != nil {
				t.Errorf("Get(%q) = %v, %v; want nil, %v", id, s, err, watcher.ErrUnknownResource)
			}
		})
		t.Run("Stop("+strconv.Quote(id)+")", func(t *testing.T) {
			if err := r.Stop(id); !errors.Is(err, watcher.ErrUnknownResource) {
				t.Errorf("Stop(%q) = %v, want %v", id, err, watcher.ErrUnknownResource)
			}
		})
	}
	held.assertStops(t, 0)
	gone.assertStops(t, 1)
	if got := r.Len(); got != 1 {
		t.Errorf("Len() = %d, want 1", got)
	}
}

// TestResourcesStopMany: stopping resources in any order leaves the others
// found by their ids (the registry compacts the holes stopped ones leave)
// and StopAll stops the rest newest first.
func TestResourcesStopMany(t *testing.T) {
	t.Parallel()
	r := watcher.NewResources(0)
	log := &orderLog{}
	const n = 100
	ss := make([]*fakeStopper, n+1)
	for i := 1; i <= n; i++ {
		ss[i] = &fakeStopper{name: strconv.Itoa(i), log: log}
		register(t, r, ss[i], strconv.Itoa(i))
	}
	// The odd ones, from the middle outwards.
	for d := 0; d < n/2; d++ {
		i := n/2 + 1 + d
		if d%2 == 1 {
			i = n/2 + 1 - d
		}
		if i < 1 || i > n || i%2 == 0 {
			continue
		}
		if err := r.Stop(strconv.Itoa(i)); err != nil {
			t.Fatalf("Stop(%d): %v", i, err)
		}
	}
	for i := 1; i <= n; i += 2 {
		if ss[i].stops.Load() == 0 {
			if err := r.Stop(strconv.Itoa(i)); err != nil {
				t.Fatalf("Stop(%d): %v", i, err)
			}
		}
	}
	if got := r.Len(); got != n/2 {
		t.Fatalf("Len() = %d, want %d", got, n/2)
	}
	for i := 1; i <= n; i++ {
		s, err := r.Get(strconv.Itoa(i))
		if i%2 == 1 {
			if !errors.Is(err, watcher.ErrUnknownResource) {
				t.Errorf("Get(%d) of a stopped one = %v, %v", i, s, err)
			}
			continue
		}
		if err != nil || s != ss[i] {
			t.Errorf("Get(%d) = %v, %v; want %v", i, s, err, ss[i])
		}
	}
	before := len(log.get())
	r.StopAll()
	var want []string
	for i := n; i >= 2; i -= 2 {
		want = append(want, strconv.Itoa(i))
	}
	if got := log.get()[before:]; !slices.Equal(got, want) {
		t.Errorf("StopAll stopped %v, want %v", got, want)
	}
	for i := 1; i <= n; i++ {
		ss[i].assertStops(t, 1)
	}
}

func TestResourcesStopReturnsStopperError(t *testing.T) {
	t.Parallel()
	errStop := errors.New("stop failed")
	r := watcher.NewResources(0)
	s := &fakeStopper{name: "1", err: errStop}
	register(t, r, s, "1")
	if err := r.Stop("1"); !errors.Is(err, errStop) {
		t.Errorf("Stop(1) = %v, want %v", err, errStop)
	}
	// It is gone even though its Stop failed.
	if err := r.Stop("1"); !errors.Is(err, watcher.ErrUnknownResource) {
		t.Errorf("second Stop(1) = %v, want %v", err, watcher.ErrUnknownResource)
	}
	s.assertStops(t, 1)
}

func TestResourcesMax(t *testing.T) {
	t.Parallel()
	r := watcher.NewResources(2)
	a, b, over := &fakeStopper{name: "a"}, &fakeStopper{name: "b"}, &fakeStopper{name: "over"}
	register(t, r, a, "1")
	register(t, r, b, "2")

	id, err := r.Register(over)
	var tooMany *watcher.TooManyError
	if !errors.As(err, &tooMany) {
		t.Fatalf("Register over the limit = %q, %v; want a *TooManyError", id, err)
	}
	if id != "" || tooMany.Max != 2 {
		t.Errorf("Register over the limit = %q, %+v; want \"\", Max 2", id, tooMany)
	}
	if got, want := err.Error(), "too many watchers on this connection (limit 2)"; got != want {
		t.Errorf("error text %q, want %q", got, want)
	}
	over.assertStops(t, 1)
	a.assertStops(t, 0)
	b.assertStops(t, 0)
	if got := r.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2", got)
	}

	// Stopping one frees a slot; the refused registration used no id.
	if err := r.Stop("1"); err != nil {
		t.Fatalf("Stop(1): %v", err)
	}
	register(t, r, &fakeStopper{name: "c"}, "3")
}

func TestResourcesNoLimit(t *testing.T) {
	t.Parallel()
	for _, max := range []int{0, -1} {
		r := watcher.NewResources(max)
		for i := range 1000 {
			register(t, r, &fakeStopper{}, strconv.Itoa(i+1))
		}
		r.StopAll()
	}
}

func TestResourcesStopAll(t *testing.T) {
	t.Parallel()
	var log orderLog
	r := watcher.NewResources(0)
	stoppers := make(map[string]*fakeStopper)
	for i := 1; i <= 12; i++ {
		id := strconv.Itoa(i)
		s := &fakeStopper{name: id, log: &log}
		stoppers[id] = s
		register(t, r, s, id)
	}
	for _, id := range []string{"5", "11"} {
		if err := r.Stop(id); err != nil {
			t.Fatalf("Stop(%s): %v", id, err)
		}
	}

	r.StopAll()
	// Newest first, by number: "10" after "9" would be the string order.
	want := []string{"5", "11", "12", "10", "9", "8", "7", "6", "4", "3", "2", "1"}
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("stop order %q, want %q", got, want)
	}
	for _, s := range stoppers {
		s.assertStops(t, 1)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("after StopAll, Len() = %d, want 0", got)
	}
	if _, err := r.Get("1"); !errors.Is(err, watcher.ErrUnknownResource) {
		t.Errorf("after StopAll, Get(1) = %v, want %v", err, watcher.ErrUnknownResource)
	}
	if err := r.Stop("12"); !errors.Is(err, watcher.ErrUnknownResource) {
		t.Errorf("after StopAll, Stop(12) = %v, want %v", err, watcher.ErrUnknownResource)
	}

	late := &fakeStopper{name: "late", log: &log}
	if id, err := r.Register(late); !errors.Is(err, watcher.ErrResourcesClosed) || id != "" {
		t.Errorf("Register after StopAll = %q, %v; want \"\", %v", id, err, watcher.ErrResourcesClosed)
	}
	late.assertStops(t, 1)

	r.StopAll() // idempotent
	for _, s := range stoppers {
		s.assertStops(t, 1)
	}
	if got, want := log.get(), append(want, "late"); !slices.Equal(got, want) {
		t.Errorf("stop order after second StopAll %q, want %q", got, want)
	}
}

func TestResourcesStopAllEmpty(t *testing.T) {
	t.Parallel()
	r := watcher.NewResources(1)
	r.StopAll()
	s := &fakeStopper{}
	if _, err := r.Register(s); !errors.Is(err, watcher.ErrResourcesClosed) {
		t.Errorf("Register after StopAll = %v, want %v", err, watcher.ErrResourcesClosed)
	}
	s.assertStops(t, 1)
}

// TestResourcesWatchers is the connection's view: watchers registered,
// then the connection closes.
func TestResourcesWatchers(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	r := watcher.NewResources(0)
	nw := watcher.NewNotify()
	nw.OnStop(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, nw.Sink()))
	sw := watcher.NewStrings()
	sw.OnStop(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, sw.Sink()))
	register(t, r, nw, "1")
	register(t, r, sw, "2")

	got, err := r.Get("1")
	if err != nil {
		t.Fatalf("Get(1): %v", err)
	}
	notify, ok := got.(*watcher.Notify)
	if !ok {
		t.Fatalf("Get(1) = %T, want *watcher.Notify", got)
	}
	res := make(chan error, 1)
	go func() { res <- notify.Next(t.Context()) }()

	r.StopAll()
	watchertest.AssertStopped(t, receive(t, res, "blocked Next after StopAll"))
	_, err = sw.Next(t.Context())
	watchertest.AssertStopped(t, err)
	if got := hub.Subscriptions(); got != 0 {
		t.Errorf("after StopAll, hub has %d subscriptions, want 0", got)
	}
}

// TestResourcesConcurrent registers, gets and stops from many goroutines
// while the connection closes: every stopper is stopped exactly once, and
// no id is handed out twice.
func TestResourcesConcurrent(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 32, 50
	r := watcher.NewResources(0)
	all := make([][]*fakeStopper, workers)
	var mu sync.Mutex
	ids := make(map[string]bool)
	var unexpected atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		all[w] = make([]*fakeStopper, perWorker)
		wg.Go(func() {
			<-start
			for i := range perWorker {
				s := &fakeStopper{}
				all[w][i] = s
				id, err := r.Register(s)
				if err != nil {
					if !errors.Is(err, watcher.ErrResourcesClosed) {
						unexpected.Add(1)
					}
					continue
				}
				mu.Lock()
				if ids[id] {
					unexpected.Add(1)
				}
				ids[id] = true
				mu.Unlock()
				if got, err := r.Get(id); err == nil && got != s {
					unexpected.Add(1)
				}
				if i%2 == 0 {
					if err := r.Stop(id); err != nil && !errors.Is(err, watcher.ErrUnknownResource) {
						unexpected.Add(1)
					}
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		r.StopAll()
	})
	close(start)
	wg.Wait()
	r.StopAll()

	if n := unexpected.Load(); n != 0 {
		t.Errorf("%d unexpected results", n)
	}
	for w := range all {
		for i, s := range all[w] {
			if got := s.stops.Load(); got != 1 {
				t.Errorf("worker %d stopper %d stopped %d times, want 1", w, i, got)
			}
		}
	}
	if got := r.Len(); got != 0 {
		t.Errorf("Len() = %d, want 0", got)
	}
}
