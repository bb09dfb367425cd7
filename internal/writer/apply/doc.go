// Package apply writes what follows a DynamicPrefix, one object at a time: a
// pool of any kind, an HA Service, a CiliumBGPAdvertisement, the
// DynamicPrefix's own status, and Calico's IPPools with their draining
// siblings (ippools.go). For each it
// renders what the object should hold for a decision, compares that in
// canonical form with what is live (or with what it wrote last, until the
// cache shows it), and patches only a difference, only the fields we own,
// conditional on the version it read, through the write permit (package
// write). Each step returns a permit.Outcome saying whether retrying can help.
//
// It is the one package that writes to the API server for the writer (events
// included; the leader election's Lease aside): the shadow's plan and the
// write counts hang off this one place, and a test keeps it so.
package apply
