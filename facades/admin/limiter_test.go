package admin

import (
	"testing"
	"time"
)

func TestLimiterBucket(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(LimiterConfig{Max: 2, Refill: time.Second, Now: func() time.Time { return now }})
	for i := 0; i < 2; i++ {
		if _, ok := l.Acquire(); !ok {
			t.Fatalf("token %d refused", i)
		}
	}
	if _, ok := l.Acquire(); ok {
		t.Fatal("empty bucket admitted a login")
	}
	now = now.Add(time.Second)
	if _, ok := l.Acquire(); !ok {
		t.Fatal("refilled token refused")
	}
	now = now.Add(time.Hour) // the bucket never holds more than Max
	for i := 0; i < 2; i++ {
		if _, ok := l.Acquire(); !ok {
			t.Fatalf("token %d after refill refused", i)
		}
	}
	if _, ok := l.Acquire(); ok {
		t.Fatal("bucket exceeded Max")
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := NewLimiter(LimiterConfig{Concurrent: 1})
	release, ok := l.Acquire()
	if !ok {
		t.Fatal("first login refused")
	}
	if _, ok := l.Acquire(); ok {
		t.Fatal("second concurrent login admitted")
	}
	release()
	if _, ok := l.Acquire(); !ok {
		t.Fatal("login after release refused")
	}
	var nilLimiter *Limiter
	if _, ok := nilLimiter.Acquire(); !ok {
		t.Fatal("nil limiter refused")
	}
}
