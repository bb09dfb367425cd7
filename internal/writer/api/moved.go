package api

import "github.com/renumber/renumber/internal/writer/model"

// The model moved to internal/writer/model; these names stand for it until
// the callers are renamed.
type (
	Model              = model.Model
	DNSSource          = model.DNSSource
	Range              = model.Range
	Subnet             = model.Subnet
	AddressRangeStatus = model.AddressRangeStatus
	SubnetStatus       = model.SubnetStatus
)

const (
	StateActive     = model.StateActive
	StateDraining   = model.StateDraining
	StateExpired    = model.StateExpired
	MappingNPTv6    = model.MappingNPTv6
	MappingNetmap   = model.MappingNetmap
	MaxDNSServers   = model.MaxDNSServers
	DefaultRALength = model.DefaultRALength
)

var (
	ErrInvalid        = model.ErrInvalid
	ErrBudgetExceeded = model.ErrBudgetExceeded
	ErrInvalidPrefix  = model.ErrInvalidPrefix
	Parse             = model.Parse
	Splice            = model.Splice
	SpliceRange       = model.SpliceRange
	SubnetAt          = model.SubnetAt
	Covering          = model.Covering
	Bounds            = model.Bounds
	Map               = model.Map
)
