// Package uplink decides which links the agent follows: its own --interface
// links plus every interface a DynamicPrefix names. It reads DynamicPrefixes
// from their JSON through a view of the few spec fields involved: the API types
// (package dynamicprefix) need apimachinery, which the agent does not link.
package uplink

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/renumber/renumber/internal/agent/kubehttp"
)

// Follower is what one DynamicPrefix asks of the agents.
type Follower struct {
	Interface  string // "": the agents' --interface links
	GlobalOnly bool   // spec.acquisition.prefixFilter.requireGlobalUnicast (default true)
}

// view is the part of a DynamicPrefix read here; field names as in
// dynamicprefix.Spec (a test holds the two together).
type view struct {
	Spec struct {
		Acquisition struct {
			RouterAdvertisement *struct {
				Interface string `json:"interface"`
				Enabled   *bool  `json:"enabled"`
			} `json:"routerAdvertisement"`
			PrefixFilter *struct {
				RequireGlobalUnicast *bool `json:"requireGlobalUnicast"`
			} `json:"prefixFilter"`
		} `json:"acquisition"`
	} `json:"spec"`
}

// Decode reads one DynamicPrefix; follows is false when it does not follow
// Router Advertisements (none configured, or enabled: false).
func Decode(raw []byte) (f Follower, follows bool, err error) {
	var v view
	if err := json.Unmarshal(raw, &v); err != nil {
		return Follower{}, false, fmt.Errorf("uplink: decoding DynamicPrefix: %w", err)
	}
	a := v.Spec.Acquisition
	if a.RouterAdvertisement == nil || (a.RouterAdvertisement.Enabled != nil && !*a.RouterAdvertisement.Enabled) {
		return Follower{}, false, nil
	}
	f.Interface = a.RouterAdvertisement.Interface
	f.GlobalOnly = a.PrefixFilter == nil || a.PrefixFilter.RequireGlobalUnicast == nil || *a.PrefixFilter.RequireGlobalUnicast
	return f, true, nil
}

// Links returns the links the agent must watch: defaults plus every interface
// a follower names. For each, whether only global unicast prefixes are
// reported: true unless some follower of that link turned the filter off (the
// writer then applies each DynamicPrefix's own filter). A follower without an
// interface follows the defaults.
func Links(defaults []string, followers []Follower) map[string]bool {
	global := map[string]bool{}
	followed := map[string]bool{}
	for _, l := range defaults {
		global[l] = true
	}
	for _, f := range followers {
		targets := defaults
		if f.Interface != "" {
			targets = []string{f.Interface}
		}
		for _, l := range targets {
			if !followed[l] {
				followed[l], global[l] = true, true
			}
			global[l] = global[l] && f.GlobalOnly
		}
	}
	return global
}

// Watch calls follow with what every DynamicPrefix asks of the agents, after
// the first list and whenever that changes (status updates and other fields do
// not call it). One that cannot be read is logged and left out. synced is
// closed after the first call.
func Watch(ctx context.Context, api *kubehttp.Client, log *slog.Logger, follow func([]Follower)) (synced <-chan struct{}) {
	var last []Follower
	first := true
	return api.Watch(ctx, kubehttp.Collection{Path: "/apis/dynamic-prefix.io/v1alpha1/dynamicprefixes"}, log, func(objs kubehttp.Objects) {
		var fs []Follower
		for _, name := range slices.Sorted(maps.Keys(objs)) {
			f, follows, err := Decode(objs[name])
			if err != nil {
				log.Warn("ignoring DynamicPrefix", "name", name, "err", err)
				continue
			}
			if follows {
				fs = append(fs, f)
			}
		}
		if !first && slices.Equal(fs, last) {
			return
		}
		first, last = false, fs
		follow(fs)
	})
}
