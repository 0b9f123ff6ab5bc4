package admin

import (
	"context"
	"testing"
	"time"
)

func TestLimiterBucket(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(LimiterConfig{Max: 2, Refill: time.Second, Now: func() time.Time { return now }})
	for i := 0; i < 2; i++ {
		if _, ok := l.Acquire(context.Background()); !ok {
			t.Fatalf("token %d refused", i)
		}
	}
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("empty bucket admitted a login")
	}
	now = now.Add(time.Second)
	if _, ok := l.Acquire(context.Background()); !ok {
		t.Fatal("refilled token refused")
	}
	now = now.Add(time.Hour) // the bucket never holds more than Max
	for i := 0; i < 2; i++ {
		if _, ok := l.Acquire(context.Background()); !ok {
			t.Fatalf("token %d after refill refused", i)
		}
	}
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("bucket exceeded Max")
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := NewLimiter(LimiterConfig{Concurrent: 1})
	release, ok := l.Acquire(context.Background())
	if !ok {
		t.Fatal("first login refused")
	}
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("second concurrent login admitted")
	}
	release()
	if _, ok := l.Acquire(context.Background()); !ok {
		t.Fatal("login after release refused")
	}
	var nilLimiter *Limiter
	if _, ok := nilLimiter.Acquire(context.Background()); !ok {
		t.Fatal("nil limiter refused")
	}
}

// A login that finds every slot taken waits for one, up to Wait: it is
// admitted when a slot is released, refused when Wait passes or its
// context ends first.
func TestLimiterConcurrentWaits(t *testing.T) {
	l := NewLimiter(LimiterConfig{Concurrent: 1, Wait: time.Hour})
	release, ok := l.Acquire(context.Background())
	if !ok {
		t.Fatal("first login refused")
	}
	got := make(chan bool)
	go func() {
		r, ok := l.Acquire(context.Background())
		if ok {
			r()
		}
		got <- ok
	}()
	release()
	if !<-got {
		t.Fatal("a waiting login was refused when a slot was released")
	}

	release, _ = l.Acquire(context.Background())
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, ok := l.Acquire(ctx); got <- ok }()
	cancel()
	if <-got {
		t.Fatal("a login whose context ended was admitted with no slot free")
	}
	short := NewLimiter(LimiterConfig{Concurrent: 1, Wait: time.Millisecond})
	r, _ := short.Acquire(context.Background())
	defer r()
	if _, ok := short.Acquire(context.Background()); ok {
		t.Fatal("a login was admitted past Wait with no slot free")
	}
}

// A login refused by the bucket after it took a slot gives the slot back.
func TestLimiterRefusedLoginFreesSlot(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(LimiterConfig{Max: 1, Refill: time.Hour, Concurrent: 1, Now: func() time.Time { return now }})
	release, ok := l.Acquire(context.Background())
	if !ok {
		t.Fatal("first login refused")
	}
	release()
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("empty bucket admitted a login")
	}
	now = now.Add(time.Hour)
	if _, ok := l.Acquire(context.Background()); !ok {
		t.Fatal("the refused login kept its slot")
	}
}

// Turning the rate limit on while serving starts with a full bucket.
func TestLimiterSetRateFromOff(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(LimiterConfig{Now: func() time.Time { return now }})
	now = now.Add(time.Minute)
	l.SetRate(2, time.Hour)
	for i := range 2 {
		if _, ok := l.Acquire(context.Background()); !ok {
			t.Fatalf("login %d after turning the limit on refused", i)
		}
	}
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("bucket exceeded its size")
	}
}
