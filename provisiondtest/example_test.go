package provisiondtest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// New is Start without a testing.TB, for a TestMain or an example; the
// caller must Close. A test writes srv := provisiondtest.Start(t) and gets
// the same Server, stopped at its cleanup.
func ExampleNew() {
	srv, err := provisiondtest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	c, err := client.DialCredentialsFile(ctx, srv.CredentialsFile(), client.Config{ModelUUID: srv.DefaultModel()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginAdmin(ctx, srv.Credentials()); err != nil {
		log.Fatal(err)
	}
	st, err := client.NewModelAdmin(c).Status(ctx, params.ModelArgs{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Model, st.Type, len(st.Machines))
	// Output: default iaas 0
}
