package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Each example runs against a real daemon started by provisiondtest.New
// (a test would use provisiondtest.Start(t)), so `go test` runs them and
// checks their output.

func exampleServer() *provisiondtest.Server {
	srv, err := provisiondtest.New()
	if err != nil {
		log.Fatal(err)
	}
	return srv
}

// Dial the daemon a credentials.yaml describes and log in as its admin
// user: what provisionctl does, and what a test of code that reads
// credentials.yaml sees.
func ExampleDialCredentials() {
	srv := exampleServer()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	creds, err := credentials.Read(srv.CredentialsFile())
	if err != nil {
		log.Fatal(err)
	}
	// An empty ModelUUID dials the controller endpoint (/api).
	c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.LoginAdmin(ctx, creds)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.UserInfo.Identity, res.UserInfo.ControllerAccess)
	fmt.Println(res.ModelTag == "model-"+creds.DefaultModelUUID)
	// Output:
	// user-admin superuser
	// true
}

// The controller agent is the Provisioner of a model's top-level machines.
func ExampleConn_LoginControllerAgent() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()

	c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginControllerAgent(ctx, creds); err != nil {
		log.Fatal(err)
	}
	uuid, err := client.NewProvisioner(c).ModelUUID(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(uuid.Result == creds.DefaultModelUUID)
	// Output: true
}

// A machine agent logs in with the password and nonce its provisioner
// set, as Juju's provisioner does it: the operator adds the machine, the
// controller agent sets the agent's password and records the instance with
// the nonce, and the agent logs in.
func ExampleConn_LoginAgent() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()
	model := creds.DefaultModelUUID
	dial := func() *client.Conn {
		c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: model})
		if err != nil {
			log.Fatal(err)
		}
		return c
	}

	operator := dial()
	defer operator.Close()
	if _, err := operator.LoginAdmin(ctx, creds); err != nil {
		log.Fatal(err)
	}
	added, err := client.NewModelAdmin(operator).AddMachines(ctx, params.AddMachinesArgs{Base: "ubuntu@22.04"})
	if err != nil {
		log.Fatal(err)
	}
	tag := client.MachineTag(added.Machines[0])

	ctrl := dial()
	defer ctrl.Close()
	if _, err := ctrl.LoginControllerAgent(ctx, creds); err != nil {
		log.Fatal(err)
	}
	m := client.NewProvisioner(ctrl).Machine(tag)
	const password, nonce = "a-password-of-18-characters-or-more", "machine-0:nonce-1"
	if err := m.SetPassword(ctx, password); err != nil {
		log.Fatal(err)
	}
	agent := dial()
	defer agent.Close()
	_, err = agent.LoginAgent(ctx, tag, password, nonce)
	fmt.Println("before provisioning:", errors.Is(err, client.ErrNotProvisioned))
	if err := m.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "i-0", Nonce: nonce}); err != nil {
		log.Fatal(err)
	}
	if _, err := agent.LoginAgent(ctx, tag, password, nonce); err != nil {
		log.Fatal(err)
	}
	life, err := client.NewProvisioner(agent).Machine(tag).Life(ctx)
	fmt.Println(tag, life, err)
	// Output:
	// before provisioning: true
	// machine-0 alive <nil>
}

// Bulk calls return one result per item, each with its own error; the
// errors match the code values with errors.Is.
func ExampleProvisioner() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()
	c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginControllerAgent(ctx, creds); err != nil {
		log.Fatal(err)
	}
	p := client.NewProvisioner(c)

	res, err := p.Life(ctx, client.Entities("machine-0", "machine-7", "unit-mysql-0"))
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Results {
		fmt.Printf("%q not-found=%v unauthorized=%v\n", r.Life, errors.Is(r.Error, client.ErrNotFound), errors.Is(r.Error, client.ErrUnauthorized))
	}
	// The controller model's machine 0 is the controller itself; in the
	// default model there is no machine yet: the one-machine view returns
	// the item's error.
	_, err = p.Machine("machine-0").Life(ctx)
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// "" not-found=true unauthorized=false
	// "" not-found=true unauthorized=false
	// "" not-found=false unauthorized=true
	// true
}

// A StringsWatch delivers the initial ids at once, then what changed.
func ExampleStringsWatch() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()
	conn := func(login func(*client.Conn) error) *client.Conn {
		c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
		if err == nil {
			err = login(c)
		}
		if err != nil {
			log.Fatal(err)
		}
		return c
	}
	ctrl := conn(func(c *client.Conn) error { _, err := c.LoginControllerAgent(ctx, creds); return err })
	defer ctrl.Close()
	operator := conn(func(c *client.Conn) error { _, err := c.LoginAdmin(ctx, creds); return err })
	defer operator.Close()

	w, err := client.NewProvisioner(ctrl).WatchModelMachines(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Stop()
	fmt.Println("initial:", <-w.Changes())
	if _, err := client.NewModelAdmin(operator).AddMachines(ctx, params.AddMachinesArgs{Count: 2}); err != nil {
		log.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2 { // the two machines may come in one value or two
		for _, id := range <-w.Changes() {
			seen[id] = true
		}
	}
	fmt.Println("added:", seen["0"], seen["1"])
	// Output:
	// initial: []
	// added: true true
}

// A NotifyWatch delivers one value at once, then one per change (changes
// between two receives coalesce). Stop ends it and closes Changes.
func ExampleNotifyWatch() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()
	c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginControllerAgent(ctx, creds); err != nil {
		log.Fatal(err)
	}
	admin, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.LoginAdmin(ctx, creds); err != nil {
		log.Fatal(err)
	}

	w, err := client.NewProvisioner(c).WatchForModelConfigChanges(ctx)
	if err != nil {
		log.Fatal(err)
	}
	<-w.Changes()
	fmt.Println("initial event")
	_, err = client.NewModelAdmin(admin).SetModelConfig(ctx, params.SetModelConfigArgs{
		Config: map[string]any{"logging-config": "<root>=DEBUG"}})
	if err != nil {
		log.Fatal(err)
	}
	<-w.Changes()
	fmt.Println("config changed")
	if err := w.Stop(); err != nil {
		log.Fatal(err)
	}
	_, open := <-w.Changes()
	fmt.Println("open after Stop:", open, w.Err())
	// Output:
	// initial event
	// config changed
	// open after Stop: false <nil>
}

// The unit provisioner of a Kubernetes model reads an application's scale
// and reports its pods; the daemon makes the units.
func ExampleCAASUnitProvisioner() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()

	operator, err := client.DialCredentials(ctx, creds, client.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer operator.Close()
	if _, err := operator.LoginAdmin(ctx, creds); err != nil {
		log.Fatal(err)
	}
	ma := client.NewModelAdmin(operator)
	k8s, err := ma.AddModel(ctx, params.AddModelArgs{Name: "k8s", Type: "caas"})
	if err != nil {
		log.Fatal(err)
	}
	scale := 2
	if _, err := ma.Deploy(ctx, params.DeployArgs{Model: "k8s", Application: "web", Scale: &scale,
		CharmMetadata: "name: web\nsummary: web\ndescription: A web server.\n"}); err != nil {
		log.Fatal(err)
	}

	c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: k8s.UUID})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginControllerAgent(ctx, creds); err != nil {
		log.Fatal(err)
	}
	app := client.NewCAASUnitProvisioner(c).Application("web")
	n, err := app.Scale(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var pods []params.ApplicationUnitParams
	for i := range n {
		pods = append(pods, params.ApplicationUnitParams{ProviderId: fmt.Sprintf("web-%d", i),
			Address: fmt.Sprintf("10.1.0.%d", i+1), Status: "running"})
	}
	info, err := app.UpdateUnits(ctx, params.UpdateApplicationUnits{Units: pods})
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range info.Units {
		fmt.Println(u.ProviderId, u.UnitTag)
	}
	// Output:
	// web-0 unit-web-0
	// web-1 unit-web-1
}

// ModelAdmin is what provisionctl calls; models are named by name.
func ExampleModelAdmin() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()
	creds := srv.Credentials()
	c, err := client.DialCredentials(ctx, creds, client.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginAdmin(ctx, creds); err != nil {
		log.Fatal(err)
	}
	ma := client.NewModelAdmin(c)
	if _, err := ma.AddModel(ctx, params.AddModelArgs{Name: "edge"}); err != nil {
		log.Fatal(err)
	}
	models, err := ma.ListModels(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range models.Models {
		fmt.Println(m.Name, m.Type, m.Life, m.IsController)
	}
	_, err = ma.RemoveModel(ctx, params.RemoveModelArgs{Model: "controller"})
	fmt.Println(errors.Is(err, client.ErrForbidden))
	// Output:
	// controller iaas alive true
	// default iaas alive false
	// edge iaas alive false
	// true
}
