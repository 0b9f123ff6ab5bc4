// Package environ is provisiond's built-in cloud provider: what a Juju
// environ (provider) does for the Provisioner facade, over data the
// operator put in state.
//
//   - Networking: the network interfaces of a provisioned host (one per
//     subnet of its availability zone), the choice of the subnet a
//     container's address comes from, address arithmetic over a subnet's
//     allocatable range, MAC addresses in 00:16:3e:xx:xx:xx, and the
//     AllocateAddress / ReleaseAddress calls (which always succeed unless a
//     test injects a failure).
//   - Agent binaries: parsing of version numbers and binaries, and the
//     matching rules of FindTools / Tools over a catalog.
//   - Availability zones: the zones the operator's subnets name.
//
// It imports only the standard library: it holds no state of its own and
// never reads the database. state imports it for address arithmetic inside
// transactions; facades import it to act as the provider. (design.md:
// environ/ is the built-in networking and tools provider.)
package environ
