// Package node is the agent's view of its own Node: a merge patch of the digest
// annotation (and nothing else), and a metadata-only watch of that one Node.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/renumber/renumber/internal/agent/kubehttp"
	"github.com/renumber/renumber/internal/digest"
)

// Annotation patches the digest annotation on one Node.
type Annotation struct {
	Client *kubehttp.Client
	Node   string
}

// Patch sets the annotation to value with a JSON merge patch that names only that
// key: no other field of the Node is sent, so nothing else can be overwritten.
func (a Annotation) Patch(ctx context.Context, value string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{digest.Annotation: value}}})
	if err != nil {
		return err
	}
	if err := a.Client.MergePatch(ctx, "/api/v1/nodes/"+url.PathEscape(a.Node), body); err != nil {
		return fmt.Errorf("patching node %q: %w", a.Node, err)
	}
	return nil
}

// Watch calls live with the annotation's value whenever it changes on the Node
// named name (metadata only: kubelet's status churn is never sent), and once
// after the first list, until ctx ends. synced is closed after the first list.
func Watch(ctx context.Context, client *kubehttp.Client, log *slog.Logger, name string, live func(value string, exists bool)) (synced <-chan struct{}) {
	var last struct {
		value  string
		exists bool
		known  bool
	}
	return client.Watch(ctx, kubehttp.Collection{Path: "/api/v1/nodes", FieldSelector: "metadata.name=" + name, MetadataOnly: true}, log,
		func(objs kubehttp.Objects) {
			v, exists, err := annotation(objs[name])
			if err != nil {
				log.Warn("cannot read own Node", "node", name, "err", err)
				return
			}
			if last.known && last.value == v && last.exists == exists {
				return // kubelet's heartbeat or another field changed: nothing for us
			}
			last.value, last.exists, last.known = v, exists, true
			live(v, exists)
		})
}

// annotation reads the digest annotation from a Node's JSON (nil: no Node).
func annotation(raw json.RawMessage) (value string, exists bool, err error) {
	if raw == nil {
		return "", false, nil
	}
	var n struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", false, err
	}
	value, exists = n.Metadata.Annotations[digest.Annotation]
	return value, exists, nil
}
