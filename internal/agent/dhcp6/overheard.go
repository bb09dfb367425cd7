package dhcp6

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// A server reads a client message more leniently than insomniacslk/dhcp
// does: that library refuses a whole message for one malformed option
// (a one-byte Elapsed Time), where ISC dhcpd acts on the Release around it.
// The Watch judges what a server would act on, so it reads the few fields
// it judges by itself, walking the options as the wire lays them out and
// skipping any it does not need, however malformed; and it unwraps a
// Relay-Forward (any host may play a relay), judging the message inside.

// Bounds on what one datagram can make the walker do. It walks every
// option, as a server does (a cap on options walked let 64 empty ones hide
// the Client ID of a Release): each takes 4 bytes at least, so the walk is
// bounded by the datagram's length, as reading it is. It unwraps
// Relay-Forwards as deep as they go, as ISC dhcpd does (a limit of 8, RFC
// 8415's HOP_COUNT_LIMIT, let a Release in nine go unheard): each level
// takes 38 bytes at least (its header and the Relay Message option's), and
// the options walked at one level lie outside the message the next level
// reads, so the whole is one pass over the datagram.
const maxPrefixes = 16 // IA Prefixes kept per message

// overheard is what the Watch judges of one client message.
type overheard struct {
	Type    dhcpv6.MessageType
	XID     dhcpv6.TransactionID
	Client  []byte         // the first Client Identifier's DUID (nil: none)
	Rapid   bool           // a Rapid Commit option
	IAPD    bool           // an IA_PD under the client's IAID
	Any     bool           // that IA_PD names no prefix, or a malformed one
	Named   []netip.Prefix // the prefixes it names (at most maxPrefixes)
	Hinted  bool           // that IA_PD hints T1, T2 or a prefix's lifetimes (the client never does)
	Relayed bool           // read from inside a Relay-Forward
	// Print identifies the message as sent, Elapsed Time aside: a
	// retransmission (or a replay) of one of the client's own messages
	// has the same.
	Print [sha256.Size]byte
}

// readHeard reads b, a datagram heard on the servers' port, for the IA_PD
// of iaid; ok is false when it is no client message (too short, or a
// server's or relay's message with no client message inside).
func readHeard(b []byte, iaid [4]byte) (h overheard, ok bool) {
	for {
		if len(b) < 4 {
			return overheard{}, false
		}
		if dhcpv6.MessageType(b[0]) != dhcpv6.MessageTypeRelayForward {
			break
		}
		// msg-type, hop-count, link-address, peer-address, options.
		if len(b) < 34 {
			return overheard{}, false
		}
		inner := []byte(nil)
		walkOptions(b[34:], func(code uint16, v []byte) bool {
			if dhcpv6.OptionCode(code) == dhcpv6.OptionRelayMsg {
				inner = v
				return false
			}
			return true
		})
		if inner == nil {
			return overheard{}, false
		}
		b, h.Relayed = inner, true
	}
	switch dhcpv6.MessageType(b[0]) {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRenew,
		dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline, dhcpv6.MessageTypeInformationRequest:
	default:
		return overheard{}, false
	}
	h.Type = dhcpv6.MessageType(b[0])
	copy(h.XID[:], b[1:4])
	// The print hashes the message as walked, in runs between the Elapsed
	// Time options (one write per run, not per option: 350 empty options
	// cost 700 writes, 17 us a packet in a flood).
	print, at, from := sha256.New(), 4, 0
	walkOptions(b[4:], func(code uint16, v []byte) bool {
		start := at
		at += 4 + len(v)
		switch dhcpv6.OptionCode(code) {
		case dhcpv6.OptionElapsedTime: // changes with every retransmission
			print.Write(b[from:start])
			from = at
		case dhcpv6.OptionClientID:
			if h.Client == nil {
				h.Client = bytes.Clone(v)
			}
		case dhcpv6.OptionRapidCommit:
			h.Rapid = true
		case dhcpv6.OptionIAPD:
			h.readIAPD(v, iaid)
		}
		return true
	})
	print.Write(b[from:at])
	print.Sum(h.Print[:0])
	return h, true
}

// readIAPD notes the prefixes an IA_PD option's body v names, if it is
// iaid's: IAID, T1, T2, then options, the IA Prefixes among them.
func (h *overheard) readIAPD(v []byte, iaid [4]byte) {
	if len(v) < 12 || [4]byte(v[:4]) != iaid {
		return
	}
	h.IAPD = true
	h.Hinted = h.Hinted || binary.BigEndian.Uint64(v[4:12]) != 0
	named := 0
	walkOptions(v[12:], func(code uint16, o []byte) bool {
		if dhcpv6.OptionCode(code) != dhcpv6.OptionIAPrefix {
			return true
		}
		named++
		// preferred, valid, prefix-length, prefix.
		h.Hinted = h.Hinted || len(o) >= 8 && binary.BigEndian.Uint64(o[:8]) != 0
		if len(o) < 25 || o[8] > 128 {
			h.Any = true // a server may read it as anything
			return true
		}
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte(o[9:25])), int(o[8])).Masked()
		if len(h.Named) < maxPrefixes {
			h.Named = append(h.Named, p)
		} else {
			h.Any = true
		}
		return true
	})
	if named == 0 {
		h.Any = true
	}
}

// walkOptions calls f with each option in b (code, value) until f returns
// false or the rest is too short for the length an option states (the
// options before it still count: a server that reads up to the break acts
// on them).
func walkOptions(b []byte, f func(code uint16, v []byte) bool) {
	for {
		if len(b) < 4 {
			return
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			return
		}
		if !f(code, b[4:4+n]) {
			return
		}
		b = b[4+n:]
	}
}
