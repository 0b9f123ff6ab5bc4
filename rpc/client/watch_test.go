package client_test

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// closed waits for ch to be closed, draining values.
func closed[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	timeout := time.After(provisiondtest.ChangeTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("Changes was not closed")
		}
	}
}

func TestWatchStopWithoutReading(t *testing.T) {
	srv := provisiondtest.Start(t)
	p := client.NewProvisioner(srv.ControllerAgent(t, srv.DefaultModel()))
	w, err := p.WatchModelMachines(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads the initial value: Stop still ends the goroutine.
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	closed(t, w.Changes())
	if err := w.Stop(); err != nil || w.Err() != nil {
		t.Fatalf("second Stop = %v, Err = %v", err, w.Err())
	}
	// The server forgot the watcher.
	_, err = client.NewStringsWatcher(p.Conn(), w.ID()).Next(t.Context())
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Next after Stop: %v", err)
	}
}

func TestWatchEndsWithItsConnection(t *testing.T) {
	srv := provisiondtest.Start(t)
	c := srv.ControllerAgent(t, srv.DefaultModel())
	w, err := client.NewProvisioner(c).WatchForModelConfigChanges(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	provisiondtest.Next(t, w)
	c.Close() // the watch waits in Next
	closed(t, w.Changes())
	if !errors.Is(w.Err(), client.ErrConnClosed) {
		t.Fatalf("Err = %v; want ErrConnClosed", w.Err())
	}
	if err := w.Stop(); err != nil {
		t.Fatalf("Stop after the connection ended: %v", err)
	}

	// Blocked delivering (nobody reads) when the connection ends.
	c2 := srv.ControllerAgent(t, srv.DefaultModel())
	w2, err := client.NewProvisioner(c2).WatchModelMachines(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	// The goroutine may have delivered nothing: it ends anyway.
	closed(t, w2.Changes())
	if !errors.Is(w2.Err(), client.ErrConnClosed) {
		t.Fatalf("Err = %v; want ErrConnClosed", w2.Err())
	}
	w2.Stop() // TestMain checks that no goroutine is left
}

func TestWatchStoppedOnTheServer(t *testing.T) {
	srv := provisiondtest.Start(t)
	p := client.NewProvisioner(srv.ControllerAgent(t, srv.DefaultModel()))
	w, err := p.WatchMachineErrorRetry(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	provisiondtest.Next(t, w)
	// Someone else stops it by id: the watch ends with code "stopped"
	// (its Next was waiting) or "not found" (its Next came after).
	if err := client.NewNotifyWatcher(p.Conn(), w.ID()).Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	closed(t, w.Changes())
	if !errors.Is(w.Err(), client.ErrStopped) && !errors.Is(w.Err(), client.ErrNotFound) {
		t.Fatalf("Err = %v; want ErrStopped or ErrNotFound", w.Err())
	}
}

func TestNewWatchFromResults(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := t.Context()
	model := srv.DefaultModel()
	agent := srv.MachineAgent(t, model, "0")
	p := client.NewProvisioner(agent)
	// A bulk watch: one item per machine, each started on its own.
	res, err := p.WatchContainers(ctx, params.WatchContainers{Params: []params.WatchContainer{
		{MachineTag: "machine-0", ContainerType: "lxd"}, {MachineTag: "machine-1", ContainerType: "lxd"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NewStringsWatch(agent, res.Results[1]); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("item 1: %v", err)
	}
	w, err := client.NewStringsWatch(agent, res.Results[0])
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := provisiondtest.Next(t, w); len(got) != 0 {
		t.Fatalf("initial containers = %v", got)
	}
	srv.ProvisionMachine(t, model, "0/lxd/0")
	if got := provisiondtest.Next(t, w); !slices.Equal(got, []string{"0/lxd/0"}) {
		t.Fatalf("containers = %v", got)
	}
	if _, err := client.NewNotifyWatch(agent, params.NotifyWatchResult{}); err == nil {
		t.Fatal("a result without a watcher id started a watch")
	}
}

func TestDialCredentials(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := t.Context()
	creds := srv.Credentials()

	// An address that refuses first: the next one is tried.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	creds.APIAddresses = append([]string{dead}, creds.APIAddresses...)
	c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.ControllerModelUUID})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, err := c.LoginControllerAgent(ctx, creds); err != nil || res.ModelTag != "model-"+creds.ControllerModelUUID {
		t.Fatalf("controller agent login: %+v, %v", res, err)
	}

	// None answers: every address's error is reported.
	creds.APIAddresses = []string{dead}
	if _, err := client.DialCredentials(ctx, creds, client.Config{}); err == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("dead address: %v", err)
	}
	creds.APIAddresses = nil
	if _, err := client.DialCredentials(ctx, creds, client.Config{}); err == nil {
		t.Fatal("no addresses: dialled")
	}
	if _, err := client.DialCredentialsFile(ctx, srv.CredentialsFile()+".missing", client.Config{}); err == nil {
		t.Fatal("missing file: dialled")
	}

	// Credentials without passwords (rewritten after being lost) fail
	// before any call.
	noPw := srv.Credentials()
	noPw.AdminPassword, noPw.ControllerAgent.Password = "", ""
	c2 := srv.Dial(t, "")
	if _, err := c2.LoginAdmin(ctx, noPw); err == nil {
		t.Fatal("LoginAdmin without a password")
	}
	if _, err := c2.LoginControllerAgent(ctx, noPw); err == nil {
		t.Fatal("LoginControllerAgent without a password")
	}
	if res, err := c2.LoginAdmin(ctx, srv.Credentials()); err != nil || res.ModelTag != "" {
		t.Fatalf("admin on /api: %+v, %v", res, err)
	}
}
