// Package storage is provisiond's model of workload storage, as in Juju:
// the storage providers (kubernetes, rootfs, tmpfs, loop), the registry
// that finds them by type, the pools that configure them, and the rules
// that turn a charm's storage and an application's storage constraints
// into filesystem and volume parameters. It keeps no data itself: pools
// are kept by a PoolStore, which the state package implements over its
// database (MemPoolStore keeps them in memory). It imports nothing else
// of provisiond's.
//
// # Providers and the registry
//
// A Provider has a type, a Scope (environ or machine), is dynamic or
// static, supports block and/or filesystem storage (Kind), validates the
// attributes of its pools and reads them into Params. A Registry is a
// fixed set of providers: KubernetesRegistry for a CAAS model (kubernetes
// plus the common loop, rootfs and tmpfs), MachineRegistry for an IAAS
// model on the built-in environ (with BuiltinEnvironProviders: builtin,
// ebs and cinder, static block providers whose volumes come with the
// instance). An unknown type is NotFound: `storage provider "x" not found`.
//
// # Pools
//
// A pool (Config) is a name, a provider type and attributes. The Manager
// validates pools against its registry and keeps them in its PoolStore:
// Create (names follow Juju's rule, IsValidPoolName; a taken name is
// AlreadyExists), Replace, Pool and Get (Get, as Juju, resolves a name
// that is not a pool but is a provider type to that provider with no
// attributes), List (sorted by name) and Remove. Whether a pool is still
// in use is not known here: callers refuse to remove such pools.
//
// # Constraints and defaults
//
// Constraints are parsed from Juju's "POOL,SIZE,COUNT" (fields in any
// order, sizes such as 512M or 10G in MiB) and "NAME=POOL,SIZE,COUNT"
// forms. DefaultPool and ConstraintsWithDefaults fill in what a user left
// out as Juju does; FilesystemMountPoint places charm filesystems; and
// Manager.ApplicationFilesystems builds the filesystems of
// CAASUnitProvisioner.ProvisioningInfo. Manager.VolumeParams resolves the
// volumes of the machine Provisioner.ProvisioningInfo from the same pools
// (a volume without a pool: storage-default-block-source, else loop).
//
// # Errors
//
// Errors carry juju/errors kinds (NotFound, NotValid, AlreadyExists,
// NotSupported), kept through every wrapping, so the facades' one error
// table maps them to wire codes. The messages are Juju's.
//
// # Concurrency
//
// Nothing here starts a goroutine or blocks. Providers are stateless and
// a Registry is immutable after construction: both are safe for
// concurrent use. A Manager holds no state of its own and is as safe as
// its PoolStore; MemPoolStore is safe for concurrent use (one mutex), and
// a PoolStore backed by a database must make each call one transaction.
// Manager.Create relies on PutPool refusing a taken name atomically, so
// two concurrent creates of one name yield one pool and one
// AlreadyExists. Values passed in and returned (Config attributes,
// FilesystemParams maps) are copies: callers own them.
package storage
