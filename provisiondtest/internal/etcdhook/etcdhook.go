// Package etcdhook carries the embedded etcd from package
// provisiondtest/embeddedetcd to package provisiondtest, so that the kit
// itself does not link etcd's server: a test that wants an embedded etcd
// imports embeddedetcd (as a database/sql driver is imported), and only that
// test's binary carries etcd's server and its dependencies.
package etcdhook

// Cluster is a running embedded etcd.
type Cluster struct {
	Endpoints []string
	// MaxTxnOps and MaxRequestBytes are the cluster's limits, for the
	// daemons on it.
	MaxTxnOps, MaxRequestBytes int
	// Close stops the cluster.
	Close func()
}

// Start starts a one-member embedded etcd with its data under dir; nil
// until package embeddedetcd is linked in.
var Start func(dir string) (*Cluster, error)
