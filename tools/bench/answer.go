package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// What the user sees: one HA Service with a hostname, a real external-dns
// (the newest release make external-dns builds) keeping a real BIND 9's zone
// over RFC 2136 with policy sync, as the DNS world tests run it. Each change
// is the router's (radvd's SIGHUP with a prefix the node never saw); measured
// are the times to the Service's external-dns target and to BIND answering
// the new address alone.

type dnsAnswer struct {
	At          string    `json:"measuredAt"`
	ExternalDNS string    `json:"externalDNS"`
	Flags       string    `json:"externalDNSFlags"`
	Changes     int       `json:"changes"`
	ToTargetMS  []float64 `json:"sighupToTargetMillis"`
	ToAnswerMS  []float64 `json:"sighupToAnswerMillis"`
}

// answerExternalDNS is the release the bench runs: the newest claimed.
const answerExternalDNS = "external-dns-v0.22.0"

// answerFlags are the DNS world's (e2e/dig_test.go's externalDNSFlags).
var answerFlags = []string{"--policy=sync", "--interval=10s", "--events", "--min-event-sync-interval=1s"}

func runAnswer(ctx context.Context, changes int) (*dnsAnswer, error) {
	agentBin, writerBin, err := binaries()
	if err != nil {
		return nil, err
	}
	if _, err := world.Bin(answerExternalDNS); err != nil {
		return nil, fmt.Errorf("answer: %w (make external-dns)", err)
	}
	const zone, name, suffix = "example.test", "web.example.test", "::ffff:0:0:1"
	progress("answer: 1 node, BIND for %s, %s, one HA Service named %s; %d changes", zone, answerExternalDNS, name, changes)
	w, err := startInstalledWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	z, err := w.StartZone(ctx, zone, "www IN AAAA 2001:db8:ffff::80")
	if err != nil {
		return nil, err
	}
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: fresh(0), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return nil, err
	}
	dp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "metadata": map[string]any{"name": "home"},
		"spec": map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
			"transition": map[string]any{"mode": "ha"}},
	}}
	if _, err := w.API.Dynamic.Resource(api.GVR).Create(ctx, dp, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/suffix": suffix,
			"external-dns.kubernetes.io/hostname": name, "external-dns.alpha.kubernetes.io/hostname": name}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if _, err := w.API.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := w.StartAgent(ctx, agentBin, "node1"); err != nil {
		return nil, err
	}
	if _, err := w.StartWriter(ctx, writerBin, "writer-a"); err != nil { // the shipped flags
		return nil, err
	}
	if _, err := w.StartExternalDNS(answerExternalDNS, z, answerFlags...); err != nil {
		return nil, err
	}
	addr := func(i int) string {
		a, _ := model.Splice(fresh(i), netip.MustParseAddr(suffix))
		return a.String()
	}
	// follow polls every 50 ms until the Service's target is want and BIND
	// answers want alone; it returns both times since t0.
	follow := func(want string, t0 time.Time) (toTarget, toAnswer time.Duration, err error) {
		for deadline := t0.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if toTarget == 0 {
				s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
				if err == nil && s.Annotations["external-dns.kubernetes.io/target"] == want {
					toTarget = time.Since(t0)
				}
			}
			if got, err := z.Dig(ctx, name, "AAAA"); err == nil && slices.Equal(got, []string{want}) {
				return toTarget, time.Since(t0), nil
			}
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
		}
		return 0, 0, fmt.Errorf("answer: BIND never answered %s for %s (logs in %s)", want, name, w.Dir)
	}
	if _, _, err := follow(addr(0), time.Now()); err != nil {
		return nil, err
	}
	time.Sleep(settleWindow)

	a := &dnsAnswer{At: time.Now().UTC().Format(time.RFC3339), ExternalDNS: strings.TrimPrefix(answerExternalDNS, "external-dns-"),
		Flags: strings.Join(answerFlags, " "), Changes: changes}
	for i := 1; i <= changes; i++ {
		sighup := time.Now()
		if err := w.Net.Router.Advertise(ctx,
			world.Advert{Prefix: fresh(i), Valid: 30 * time.Minute, Preferred: 20 * time.Minute},
			world.Advert{Prefix: fresh(i - 1), Valid: 30 * time.Minute, Preferred: 0},
		); err != nil {
			return nil, err
		}
		toTarget, toAnswer, err := follow(addr(i), sighup)
		if err != nil {
			return nil, err
		}
		a.ToTargetMS, a.ToAnswerMS = append(a.ToTargetMS, ms(toTarget)), append(a.ToAnswerMS, ms(toAnswer))
		progress("answer %d/%d: %s -> %s: target after %s, BIND's answer after %s", i, changes, fresh(i-1), fresh(i),
			toTarget.Round(time.Millisecond), toAnswer.Round(time.Millisecond))
		time.Sleep(settleWindow)
	}
	return a, nil
}

func writeAnswer(b *strings.Builder, a *dnsAnswer) {
	fmt.Fprintf(b, "\n## The router's change to BIND's answer (%d changes, measured %s)\n\n", a.Changes, a.At)
	fmt.Fprintf(b, "One node, one HA Service with a hostname; external-dns %s (source service, provider rfc2136, TXT registry, %s) keeps BIND 9's zone. Polled every 50 ms.\n\n", a.ExternalDNS, a.Flags)
	fmt.Fprintf(b, "| | p50 | p90 |\n|---|---|---|\n")
	fmt.Fprintf(b, "| router SIGHUP -> the Service's external-dns target is the new address | %.0f ms | %.0f ms |\n", percentile(a.ToTargetMS, 50), percentile(a.ToTargetMS, 90))
	fmt.Fprintf(b, "| router SIGHUP -> BIND answers the new address alone | %.0f ms | %.0f ms |\n", percentile(a.ToAnswerMS, 50), percentile(a.ToAnswerMS, 90))
	var after []float64
	for i := range a.ToAnswerMS {
		after = append(after, a.ToAnswerMS[i]-a.ToTargetMS[i])
	}
	fmt.Fprintf(b, "| the target -> BIND's answer (external-dns's event, its sync, the RFC 2136 update) | %.0f ms | %.0f ms |\n", percentile(after, 50), percentile(after, 90))
	b.WriteString("\nThe last row is external-dns's: an event (--events) schedules its next sync 5 s later (sooner if its periodic --interval sync comes first, never sooner than --min-event-sync-interval after the last), its loop looks once a second, and the sync lists the Services, transfers the zone and sends the update; without --events it waits for --interval (10 s here, 1 min by default). From controller/controller.go, ScheduleRunOnce and Run, v0.21.0 and v0.22.0.\n")
}
