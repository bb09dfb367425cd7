// Package kind drives the e2e scenarios against a kind cluster that
// e2e/kind/run.sh (make e2e-kind) set up: the shipped manifests and images, a
// radvd container as the router, and the API server's audit log for write
// counts. The scenarios and their expectations are the local world's (e2e/);
// only the means differ: docker exec for the router and the audit log.
//
// The scenarios build only with the kind tag; without it this package is empty.
package kind
