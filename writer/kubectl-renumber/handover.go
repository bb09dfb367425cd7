package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/handover"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// handoverUsage is `kubectl renumber handover --help`.
const handoverUsage = `usage: kubectl renumber handover [--kubeconfig FILE] [--target-keys K1,K2] [--dry-run]

Hands what renumber wrote back to the existing operator (dynamic-prefix.io),
for a user switching back to it. Run it after scaling the renumber writer to 0
and before starting that operator. Pools need nothing (renumber writes their
records in that operator's formats); this rewrites each DynamicPrefix's
status.history in the shape that operator reads (draining prefixes only,
oldest first), replaces each Calico IPPool renumber created for a draining
prefix, and each CiliumBGPAdvertisement, by the one that operator finds (its
name and labels, the same spec), and hands back the DNS target keys it does
not write.
`

// runHandover is `kubectl renumber handover`.
func runHandover(ctx context.Context, out io.Writer, args []string) error {
	fs := pflag.NewFlagSet("handover", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, handoverUsage); fs.PrintDefaults() }
	kube := newKubeFlags()
	kube.add(fs)
	keys := fs.String("target-keys", strings.Join(holdings.DefaultTargetKeys, ","),
		"the DNS target keys the existing operator writes: both from its v0.0.18 on (the default), "+holdings.AnnotationTargetAlpha+" alone before")
	dryRun := fs.String("dry-run", "none", "server: the API server checks every change and makes none, and each is printed (kubectl's spelling; --dry-run alone is server, none changes)")
	fs.Lookup("dry-run").NoOptDefVal = "server"
	if err := fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
		return err
	} else if err != nil {
		return usageError{err}
	}
	dry, err := handoverDryRun(*dryRun)
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("handover takes no arguments, got %q", fs.Args())}
	}
	cfg, err := kube.restConfig("renumber-handover")
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// One discovery, before anything is written: where it fails, an IPPool or
	// advertisement must not be left behind as if it were not served.
	served, err := backends.Discover(core.Discovery(), "")
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "renumber-handover"}
	if dry {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	dps, err := dyn.Resource(api.GVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing DynamicPrefixes: %w", err)
	}
	for i := range dps.Items {
		dp, err := api.FromUnstructured(&dps.Items[i])
		if err != nil {
			return err
		}
		back := handover.Status(dp.Status)
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": dp.ResourceVersion},
			"status":   map[string]any{"history": back.History, "conditions": back.Conditions, "leaseExpiresAt": nil},
		})
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(api.GVR).Patch(ctx, dp.Name, types.MergePatchType, body, opts, "status"); err != nil {
			return fmt.Errorf("DynamicPrefix %s: %w", dp.Name, err)
		}
		fmt.Fprintf(out, "dynamicprefix/%s: status.history handed back (%d draining)\n", dp.Name, len(back.History))
	}
	if err := handBackSiblings(ctx, out, dyn, served.Calico, dry); err != nil {
		return err
	}
	if err := handBackAdvertisements(ctx, out, dyn, served.BGP, dps.Items, dry); err != nil {
		return err
	}
	svcs, err := core.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	for _, s := range svcs.Items {
		if _, role := backends.ServiceFollows(&s); role == backends.None {
			continue
		}
		patch := handover.Service(s.Annotations, strings.Split(*keys, ","))
		if patch == nil {
			continue
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": s.ResourceVersion, "annotations": patch}})
		if err != nil {
			return err
		}
		if _, err := core.CoreV1().Services(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, body, opts); err != nil {
			return fmt.Errorf("the Service %s/%s: %w", s.Namespace, s.Name, err)
		}
		fmt.Fprintf(out, "service/%s/%s: target keys handed back\n", s.Namespace, s.Name)
	}
	return nil
}

// handBackSiblings replaces each Calico IPPool renumber created for a
// draining prefix by the one the existing operator would have created: the
// old one is deleted first (never two pools with one CIDR), then the new one
// created. gvr is the IPPool resource (empty: not served).
func handBackSiblings(ctx context.Context, out io.Writer, dyn dynamic.Interface, gvr schema.GroupVersionResource, dry bool) error {
	if gvr.Empty() {
		return nil
	}
	var dryRun []string
	if dry {
		dryRun = []string{metav1.DryRunAll}
	}
	pools, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing IPPools: %w", err)
	}
	for i := range pools.Items {
		ours := &pools.Items[i]
		back := handover.Sibling(ours)
		if back == nil {
			continue
		}
		rv := ours.GetResourceVersion()
		if err := dyn.Resource(gvr).Delete(ctx, ours.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv}, DryRun: dryRun}); err != nil {
			return fmt.Errorf("IPPool %s: %w", ours.GetName(), err)
		}
		if _, err := dyn.Resource(gvr).Create(ctx, back, metav1.CreateOptions{FieldManager: "renumber-handover", DryRun: dryRun}); err != nil {
			return fmt.Errorf("IPPool %s (replacing %s, which is deleted: create it by hand from %s's spec): %w", back.GetName(), ours.GetName(), ours.GetName(), err)
		}
		fmt.Fprintf(out, "ippool/%s: replaced by ippool/%s, as that operator names and labels it\n", ours.GetName(), back.GetName())
	}
	return nil
}

// handBackAdvertisements replaces each CiliumBGPAdvertisement renumber
// created by the one the existing operator looks up: the new one is created
// first, then ours deleted, so the routes stay advertised. gvr is the
// CiliumBGPAdvertisement resource (empty: not served).
func handBackAdvertisements(ctx context.Context, out io.Writer, dyn dynamic.Interface, gvr schema.GroupVersionResource, dps []unstructured.Unstructured, dry bool) error {
	if gvr.Empty() {
		return nil
	}
	var dryRun []string
	if dry {
		dryRun = []string{metav1.DryRunAll}
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range dps {
		byName[dps[i].GetName()] = &dps[i]
	}
	adverts, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing CiliumBGPAdvertisements: %w", err)
	}
	for i := range adverts.Items {
		ours := &adverts.Items[i]
		dp, _ := backends.AdvertisementFollows(ours)
		back := handover.Advertisement(ours, byName[dp])
		if back == nil {
			continue
		}
		if _, err := dyn.Resource(gvr).Create(ctx, back, metav1.CreateOptions{FieldManager: "renumber-handover", DryRun: dryRun}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CiliumBGPAdvertisement %s: %w", back.GetName(), err)
		}
		rv := ours.GetResourceVersion()
		if err := dyn.Resource(gvr).Delete(ctx, ours.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv}, DryRun: dryRun}); err != nil {
			return fmt.Errorf("CiliumBGPAdvertisement %s: %w", ours.GetName(), err)
		}
		fmt.Fprintf(out, "ciliumbgpadvertisement/%s: replaced by ciliumbgpadvertisement/%s, as that operator names and labels it\n", ours.GetName(), back.GetName())
	}
	return nil
}

// handoverDryRun reads --dry-run as kubectl spells it. Every change handover
// makes depends on what the cluster holds, so a dry run is the API server's
// (server); client, which would send nothing, could check nothing.
func handoverDryRun(v string) (bool, error) {
	switch v {
	case "none", "false":
		return false, nil
	case "server", "true":
		return true, nil
	case "client":
		return false, errors.New("--dry-run=client is not offered: the API server checks each change (--dry-run=server)")
	}
	return false, fmt.Errorf("--dry-run=%q: want none or server", v)
}
