package main

import "testing"

// churn at a small size: the agent keeps up (every effect reported, no
// failed operation), every figure is there, and the models go at the end.
func TestChurn(t *testing.T) {
	rep := runJSON(t, "churn", "-n", "3", "--rate", "25", "--duration", "1s", "--daemon", "inproc")
	for _, name := range []string{"errors", "unfinished"} {
		if v := figure(t, rep, 3, name); v != 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	for _, name := range []string{"machine start n", "container start n", "remove n", "scale n"} {
		if figure(t, rep, 3, name) <= 0 {
			t.Errorf("no %s", name)
		}
	}
	for _, name := range []string{"ops/s", "fill", "teardown", "machine start p99", "container start p99", "remove p99", "scale p99"} {
		figure(t, rep, 3, name)
	}
}
