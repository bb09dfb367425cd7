// What a pool-like object asks for (PoolFollow) and the form its entries
// take (Form).

package holdings

// PoolFollow is what a pool's annotations ask for.
type PoolFollow struct {
	DynamicPrefix string
	AddressRange  string // dynamic-prefix.io/address-range
	Subnet        string // dynamic-prefix.io/subnet
	// Suffix, when set, makes each entry one address: the suffix on each
	// pooled prefix, inside AddressRange or Subnet when one is named, as a
	// Service's address is (ServiceAddress; a Gateway's spec.addresses).
	Suffix string
}

// Form is the shape of entries a pool can hold.
type Form uint8

const (
	// Any: CIDRs and "first-last" ranges.
	Any Form = iota
	// CIDRs only (CIDR groups, kube-vip's cidr-* keys): a range becomes its
	// smallest covering CIDR.
	CIDRs
	// Ranges only (kube-vip's range-* keys): a CIDR becomes "first-last".
	Ranges
)
