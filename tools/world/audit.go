package world

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Write is one mutating request the API server completed, from its audit log.
type Write struct {
	User        string
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Code        int
	At          time.Time
}

func (w Write) String() string {
	res := w.Resource
	if w.Subresource != "" {
		res += "/" + w.Subresource
	}
	return fmt.Sprintf("%s %s %s %s/%s -> %d", w.User, w.Verb, res, w.Namespace, w.Name, w.Code)
}

// Mark is a position in the audit log.
type Mark int64

// barrierPrefix names the ConfigMaps the world admin creates so that everything
// completed before a read of the log is known to be in it.
const barrierPrefix = "world-audit-barrier-"

var barrierSeq atomic.Int64

// Mark returns the current end of the audit log: writes after it are "since".
func (cp *ControlPlane) Mark(ctx context.Context) (Mark, error) {
	if err := cp.barrier(ctx); err != nil {
		return 0, err
	}
	st, err := os.Stat(cp.AuditLog)
	if err != nil {
		return 0, err
	}
	return Mark(st.Size()), nil
}

// WritesSince returns the mutating requests logged after m, in log order,
// excluding the world's own bookkeeping.
func (cp *ControlPlane) WritesSince(ctx context.Context, m Mark) ([]Write, error) {
	if err := cp.barrier(ctx); err != nil {
		return nil, err
	}
	return readAudit(cp.AuditLog, int64(m))
}

// barrier creates a uniquely named object and waits until the audit log shows it:
// requests that completed before the barrier started are in the log by then.
func (cp *ControlPlane) barrier(ctx context.Context) error {
	name := barrierPrefix + cp.w.ID + "-" + strconv.FormatInt(barrierSeq.Add(1), 10)
	_, err := cp.Client.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("audit barrier: %w", err)
	}
	needle := []byte(`"name":"` + name + `"`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(cp.AuditLog); err == nil && bytes.Contains(b, needle) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("audit barrier %s never reached the log", name)
}

type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	Stage          string    `json:"stage"`
}

func readAudit(path string, offset int64) ([]Write, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, err
	}
	return ParseAudit(f)
}

// ParseAudit reads the completed mutating requests from an audit log (JSON
// lines), leaving out barrier writes, the API server's own, and dry runs
// (dryRun=All: admission asked, nothing stored).
func ParseAudit(r io.Reader) ([]Write, error) {
	var out []Write
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Stage != "ResponseComplete" || strings.Contains(ev.RequestURI, "dryRun=All") {
			continue
		}
		w := Write{User: ev.User.Username, Verb: ev.Verb, At: ev.StageTimestamp}
		if ev.ObjectRef != nil {
			w.Group, w.Resource, w.Subresource = ev.ObjectRef.APIGroup, ev.ObjectRef.Resource, ev.ObjectRef.Subresource
			w.Namespace, w.Name = ev.ObjectRef.Namespace, ev.ObjectRef.Name
		}
		if ev.ResponseStatus != nil {
			w.Code = ev.ResponseStatus.Code
		}
		if strings.HasPrefix(w.Name, barrierPrefix) || strings.HasPrefix(w.User, "system:apiserver") {
			continue
		}
		out = append(out, w)
	}
	return out, sc.Err()
}

// Filter returns the writes keep accepts.
func Filter(ws []Write, keep func(Write) bool) []Write {
	var out []Write
	for _, w := range ws {
		if keep(w) {
			out = append(out, w)
		}
	}
	return out
}

// ByUser keeps the writes of one identity.
func ByUser(user string) func(Write) bool { return func(w Write) bool { return w.User == user } }
