package inspect

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/renumber/renumber/internal/writer/render"
)

// Text writes r for people, with times relative to now.
func (r Report) Text(w io.Writer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	if len(r.DynamicPrefixes) == 0 {
		line("no DynamicPrefix")
	}
	for i, dp := range r.DynamicPrefixes {
		if i > 0 {
			line("")
		}
		line("DynamicPrefix %s", dp.Name)
		cur := "none"
		if dp.Current != "" {
			cur = dp.Current + " (" + dp.Source + ")"
		}
		line("  current\t%s", cur)
		if dp.Delegation != "" {
			line("  delegation\t%s (subnets are carved from it)", dp.Delegation)
		}
		switch {
		case dp.DHCPv6TakenBy != "":
			line("  dhcpv6 client\tnone: %s (first by name) runs it on this interface, and nothing is adopted from it here (%s)", dp.DHCPv6TakenBy, render.ReasonInterfaceTaken)
		case dp.DHCPv6Client != "":
			line("  dhcpv6 client\ton %s", dp.DHCPv6Client)
			switch {
			case dp.DHCPv6Confirmer == "":
				line("  dhcpv6 confirmer\tnone: the client's delegation counts alone")
			case dp.DHCPv6Since != "":
				line("  dhcpv6 confirmer\ton %s, disagreeing since %s (client holds %s)", dp.DHCPv6Confirmer, dp.DHCPv6Since, cmp.Or(dp.DHCPv6Unconfirmed, "nothing"))
			default:
				line("  dhcpv6 confirmer\ton %s, agreeing", dp.DHCPv6Confirmer)
			}
		}
		if dp.DNSName != "" {
			line("  dns name\t%s (each server below votes)", dp.DNSName)
		}
		line("  why\t%s", dp.Why)
		for j, v := range dp.Votes {
			label := ""
			if j == 0 {
				label = "votes"
			}
			desc := "prefers " + list(v.Preferred)
			if len(v.Deprecated) > 0 {
				desc += "; deprecated " + list(v.Deprecated)
			}
			if dp.DNSName != "" {
				desc = "answers " + list(v.Preferred)
				if len(v.Deprecated) > 0 {
					desc += "; before that " + list(v.Deprecated)
				}
			}
			if v.Problem != "" {
				desc = "does not vote: " + v.Problem
			}
			line("  %s\t%s\t%s", label, v.Node, desc)
		}
		if len(dp.Votes) == 0 && dp.DNSName != "" {
			line("  votes\tno DNS server to ask")
		} else if len(dp.Votes) == 0 {
			line("  votes\tno node publishes a digest")
		}
		for _, rej := range dp.Rejected {
			line("  rejected\t%s\tby %d node(s): %s", rej.Prefix, rej.Nodes, rej.Reason)
		}
		for _, d := range dp.Draining {
			until := "until its lifetime runs out"
			if d.Expires != nil {
				until = "until " + d.Expires.Format(time.RFC3339) + " (in " + d.Expires.Sub(now).Round(time.Second).String() + ")"
			}
			line("  draining\t%s\t%s", d.Prefix, until)
		}
		var conds []string
		for _, c := range dp.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
		}
		if len(conds) > 0 {
			line("  conditions\t%s", strings.Join(conds, ", "))
		}
		line("  objects\t%s", dp.Summary())
		for _, o := range dp.Objects {
			state := "in sync"
			if !o.InSync {
				state = "would write:"
			}
			line("  \t%s\t%s", o.Object, state)
			for _, mp := range o.Mapping {
				line("  \t\t  maps %s", mp)
			}
			for _, c := range o.Pending {
				line("  \t\t  %s: %q -> %q", c.Field, c.From, c.To)
			}
		}
	}
	if r.Lease != nil {
		line("")
		renewed := "never renewed"
		if r.Lease.RenewedAt != nil {
			renewed = "renewed " + now.Sub(*r.Lease.RenewedAt).Round(time.Second).String() + " ago"
		}
		line("Lease\theld by %s, %s", r.Lease.Holder, renewed)
	}
	return tw.Flush()
}
