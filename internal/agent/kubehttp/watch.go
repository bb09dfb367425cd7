package kubehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/backoff"
)

// Collection names what Watch lists and watches.
type Collection struct {
	Path          string // e.g. /api/v1/nodes
	FieldSelector string
	// MetadataOnly asks for PartialObjectMetadata: names, labels and
	// annotations without spec or status (a Node's status changes every few
	// seconds; none of it is read).
	MetadataOnly bool
}

// Objects maps "namespace/name" (or "name") to an object's JSON.
type Objects map[string]json.RawMessage

// Watch lists col, then watches it from the list's resourceVersion, calling
// onChange with every object after the list and after each change, until ctx
// ends; calls come one at a time, from one goroutine, and the map is onChange's
// to keep. A watch that ends is resumed from the last resourceVersion seen
// (bookmarks included); when the server no longer has that version (410) the
// collection is listed again. Failures, and watches that end within a second,
// are retried with backoff (1 s doubling to 30 s); failures are logged. synced
// is closed after the first list.
func (c *Client) Watch(ctx context.Context, col Collection, log *slog.Logger, onChange func(Objects)) (synced <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		var store Objects
		var rv string
		retry := backoff.New(time.Second, 30*time.Second)
		listed := false
		for ctx.Err() == nil {
			if rv == "" {
				objs, listRV, err := c.list(ctx, col)
				if err != nil {
					wait := retry.Next()
					if ctx.Err() == nil {
						log.Warn("list failed; retrying", "path", col.Path, "err", err, "in", wait.Round(time.Millisecond))
					}
					backoff.Sleep(ctx, clock.RealClock{}, wait)
					continue
				}
				store, rv = objs, listRV
				onChange(maps.Clone(store))
				if !listed {
					listed = true
					close(done)
				}
			}
			start := time.Now()
			err := c.watch(ctx, col, &rv, store, onChange)
			if ctx.Err() != nil {
				return
			}
			// A watch that ends within a second (a server or proxy closing it
			// at once, or refusing every version) is not retried at once.
			short := time.Since(start) < time.Second
			if !short {
				retry.Reset()
			}
			var wait time.Duration
			if short || (err != nil && !IsGone(err)) {
				wait = retry.Next()
			}
			switch {
			case IsGone(err):
				log.Debug("watch resourceVersion gone; listing again", "path", col.Path)
				rv = ""
			case err != nil:
				log.Warn("watch failed; resuming", "path", col.Path, "err", err, "in", wait.Round(time.Millisecond))
			}
			if wait > 0 {
				backoff.Sleep(ctx, clock.RealClock{}, wait)
			}
		}
	}()
	return done
}

func (col Collection) accept(list bool) string {
	switch {
	case !col.MetadataOnly:
		return "application/json"
	case list:
		return "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	default:
		return "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	}
}

func (col Collection) query() url.Values {
	q := url.Values{}
	if col.FieldSelector != "" {
		q.Set("fieldSelector", col.FieldSelector)
	}
	return q
}

func (c *Client) list(ctx context.Context, col Collection) (Objects, string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, col.Path, col.query(), col.accept(true), "", nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	objs, rv, err := decodeList(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("kubehttp: list %s: %w", col.Path, err)
	}
	return objs, rv, nil
}

// watch runs one watch request until it ends.
func (c *Client) watch(ctx context.Context, col Collection, rv *string, store Objects, onChange func(Objects)) error {
	// As client-go: the server ends the watch after 5 to 10 minutes, so that
	// watches spread over API servers; the client gives it 30 s more.
	timeout := 300 + rand.IntN(300)
	q := col.query()
	q.Set("watch", "true")
	q.Set("resourceVersion", *rv)
	q.Set("allowWatchBookmarks", "true")
	q.Set("timeoutSeconds", strconv.Itoa(timeout))
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second+30*time.Second)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, col.Path, q, col.accept(false), "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("kubehttp: watch %s: %w", col.Path, err)
		}
		changed, err := apply(store, rv, ev)
		if err != nil {
			return fmt.Errorf("kubehttp: watch %s: %w", col.Path, err)
		}
		if changed {
			onChange(maps.Clone(store))
		}
	}
}

// event is one watch event (metav1.WatchEvent).
type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// meta is an object's metadata, the fields read.
type meta struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

func keyOf(raw json.RawMessage) (key, rv string, err error) {
	var m meta
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", "", err
	}
	if m.Metadata.Name == "" {
		return "", "", errors.New("object without metadata.name")
	}
	key = m.Metadata.Name
	if m.Metadata.Namespace != "" {
		key = m.Metadata.Namespace + "/" + key
	}
	return key, m.Metadata.ResourceVersion, nil
}

// decodeList reads a list response: its objects and resourceVersion.
func decodeList(r io.Reader) (Objects, string, error) {
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(r).Decode(&l); err != nil {
		return nil, "", err
	}
	if l.Metadata.ResourceVersion == "" {
		return nil, "", errors.New("list without a resourceVersion")
	}
	objs := make(Objects, len(l.Items))
	for _, it := range l.Items {
		key, _, err := keyOf(it)
		if err != nil {
			return nil, "", err
		}
		objs[key] = it
	}
	return objs, l.Metadata.ResourceVersion, nil
}

// apply folds one watch event into store and *rv, and reports whether an object
// changed. An ERROR event is returned as a *StatusError (IsGone for 410).
func apply(store Objects, rv *string, ev event) (changed bool, err error) {
	switch ev.Type {
	case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
	case "ERROR":
		var st status
		if err := json.Unmarshal(ev.Object, &st); err != nil || st.Code == 0 {
			return false, fmt.Errorf("malformed ERROR event: %.200s", ev.Object)
		}
		return false, &StatusError{Method: "WATCH", Code: st.Code, Reason: st.Reason, Message: st.Message}
	default:
		return false, fmt.Errorf("unknown event type %q", ev.Type)
	}
	if ev.Type == "BOOKMARK" {
		var m meta
		if err := json.Unmarshal(ev.Object, &m); err != nil || m.Metadata.ResourceVersion == "" {
			return false, errors.New("BOOKMARK without a resourceVersion")
		}
		*rv = m.Metadata.ResourceVersion
		return false, nil
	}
	key, objRV, err := keyOf(ev.Object)
	if err != nil {
		return false, fmt.Errorf("%s event: %w", ev.Type, err)
	}
	if objRV != "" {
		*rv = objRV
	}
	old, had := store[key]
	if ev.Type == "DELETED" {
		delete(store, key)
		return had, nil
	}
	store[key] = ev.Object
	return !had || !bytes.Equal(old, ev.Object), nil
}
