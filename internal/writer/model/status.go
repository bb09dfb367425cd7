// What the model resolves on a prefix, and the states of a prefix in the
// status's history: the pieces of the served status (internal/writer/api's
// Status) that the model and decide speak, kept here so that neither needs
// the served object's Kubernetes types.

package model

// AddressRangeStatus is a named range resolved on the current prefix
// (status.addressRanges; Model.Derived).
type AddressRangeStatus struct {
	Name  string `json:"name"`
	Start string `json:"start"`
	End   string `json:"end"`
	CIDR  string `json:"cidr"`
}

// SubnetStatus is a named subnet resolved on the current prefix
// (status.subnets; Model.Derived). BGPAdvertisement is filled in by render.
type SubnetStatus struct {
	Name             string `json:"name"`
	CIDR             string `json:"cidr"`
	BGPAdvertisement string `json:"bgpAdvertisement,omitempty"`
}

// History states.
const (
	StateActive   = "active"
	StateDraining = "draining"
	StateExpired  = "expired"
)
