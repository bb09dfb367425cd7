package permit

import (
	"cmp"
	"container/list"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"
)

// Recorder emits Kubernetes events. Event reports whether it recorded the
// event: one its budget dropped, or the API refused, is not.
type Recorder interface {
	Event(regarding *unstructured.Unstructured, warning bool, reason, note string) bool
}

// OwnRecorder is a Recorder with another for a DynamicPrefix's own problems
// (Own: a budget of its own, which no node's or tenant's events spend).
type OwnRecorder interface {
	Own() Recorder
}

// Events deduplicates events per subject: Announce emits an event only when
// its text for a subject differs from the one announced last.
//
// The subjects it remembers are bounded (maxAnnounced): they name prefixes
// that nodes report, which a hostile node chooses, and objects that tenants
// create. With room for B subjects, a pass announcing a set S of more
// cannot be told from one that changed a text without announcing at least
// |S| - B of them again: whatever is not remembered may have changed. Events
// announces no more than that at steady state: a full memory keeps the
// subjects it holds while they are still announced, and announces a new
// subject without remembering it - unless the least recently announced one
// has not been announced for staleAfter, which then gives way to it, one at
// a time. Forgetting everything at once (before: red team r6a), or the least
// recently announced whatever its age (LRU), makes a pass over B+1 subjects
// in a fixed order announce every one of them again, every pass: each is
// forgotten just before it is announced.
//
// A DynamicPrefix's own problems (subjects under OwnSubjects: its spec, its
// routers, its overlaps; only its admin's objects make them) have a memory
// of their own, which no node or tenant fills: what a tenant's Services
// crowd out is theirs, not the warnings about the DynamicPrefix. Nor do they
// spend its budget: Announce records them with the Recorder's Own when it
// has one (OwnRecorder) - all but its Services' conflicts (ownBudget).
//
// A text the Recorder does not record (its budget dropped it, the API
// refused it) is not remembered: the next pass announces it again, until it
// is recorded once (red team r7a: a tenant spending the budget silenced a
// DynamicPrefix's warning for as long as it lasted).
type Events struct {
	Recorder Recorder
	// Clock tells a subject's last announcement (nil: the system clock).
	Clock clock.PassiveClock

	mu          sync.Mutex
	own, others memory
	max         int // room in each memory; 0: maxAnnounced
}

// OwnSubjects begins the subjects of a DynamicPrefix's own problems
// ("dp/<name>[/<problem>]").
const OwnSubjects = "dp/"

// maxAnnounced bounds the subjects each memory of Announce holds.
const maxAnnounced = 4096

// staleAfter is how long a remembered subject not announced again keeps
// its place in a full memory: a pass over a DynamicPrefix announces again
// every problem it still has, so one not announced for this long is of an
// object gone, a problem ended, or a DynamicPrefix the writer seldom passes
// over (announced once more at its next pass).
const staleAfter = time.Hour

// Announce emits an event about regarding when reason and note differ from the
// last ones announced for subject, and reports whether it did. One the
// Recorder does not record is forgotten, so announced again next time.
func (e *Events) Announce(subject string, regarding *unstructured.Unstructured, warning bool, reason, note string) bool {
	e.mu.Lock()
	changed := e.memory(subject).remember(subject, reason+note, e.now(), cmp.Or(e.max, maxAnnounced))
	e.mu.Unlock()
	if !changed {
		return false
	}
	rec := e.Recorder
	if o, ok := rec.(OwnRecorder); ok && ownBudget(subject) {
		rec = o.Own()
	}
	if !rec.Event(regarding, warning, reason, note) {
		e.Forget(subject)
	}
	return changed
}

// ownBudget reports whether subject is recorded with the Recorder's Own: a
// DynamicPrefix's own problem, but for its Services' conflicts (subject
// "dp/<name>/services"), whose text names tenants' objects and changes as
// they do - a tenant could spend the own budget with it, and a warning
// announced only when it begins (RouterConflict) would then be lost.
func ownBudget(subject string) bool {
	return strings.HasPrefix(subject, OwnSubjects) && !strings.HasSuffix(subject, "/services")
}

func (e *Events) memory(subject string) *memory {
	if strings.HasPrefix(subject, OwnSubjects) {
		return &e.own
	}
	return &e.others
}

func (e *Events) now() time.Time {
	if e.Clock == nil {
		return time.Now()
	}
	return e.Clock.Now()
}

// Event emits a normal event that marks a write (every write is a transition).
func (e *Events) Event(regarding *unstructured.Unstructured, reason, note string) {
	e.Recorder.Event(regarding, false, reason, note)
}

// Forget ends subject's announcement: the next one is emitted again.
func (e *Events) Forget(subject string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.memory(subject).forget(subject)
}

// remembered counts the subjects remembered now.
func (e *Events) remembered() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.own.last) + len(e.others.last)
}

// memory is the last announcement of each of at most room subjects.
type memory struct {
	last  map[string]*list.Element // of *announced
	order *list.List               // the most recently announced first
}

type announced struct {
	subject, text string
	at            time.Time
}

// remember records text as subject's announcement at now; it reports
// whether it differs from the one remembered (always, for a subject not
// remembered). A new subject in a full memory is remembered only in the
// place of one not announced for staleAfter.
func (m *memory) remember(subject, text string, now time.Time, room int) (changed bool) {
	if el, ok := m.last[subject]; ok {
		a := el.Value.(*announced)
		changed, a.text, a.at = a.text != text, text, now
		m.order.MoveToFront(el)
		return changed
	}
	if m.last == nil {
		m.last, m.order = map[string]*list.Element{}, list.New()
	}
	if m.order.Len() >= room {
		oldest := m.order.Back()
		if now.Sub(oldest.Value.(*announced).at) < staleAfter {
			return true // announced, not remembered: the memory is full of subjects still announced
		}
		m.forget(oldest.Value.(*announced).subject)
	}
	m.last[subject] = m.order.PushFront(&announced{subject: subject, text: text, at: now})
	return true
}

func (m *memory) forget(subject string) {
	if el, ok := m.last[subject]; ok {
		delete(m.last, subject)
		m.order.Remove(el)
	}
}
