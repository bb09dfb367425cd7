package e2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
)

// TestACurrentEntryInAnotherTextStopsNoStatusWrite (seventh red team,
// r7b): renumber-writer-status admits the current prefix renamed in
// another text (2001:db8:1:0::/64: a prefix made current that the filter
// accepts) with its active entry in the same text and an acquiredAt of the
// token's choosing. decide's history matches entries by text: it reads
// 2001:db8:1::/64 as current and unchanged, gives it a new entry acquired
// when PrefixAcquired last turned True, and drains the entry in the
// token's text from now - a drain the policy admits only from the new
// current entry's acquiredAt, since the current prefix's text changed
// ("the writer may drain ... only from when the new current prefix is
// acquired"). Every status write of the writer's is refused then, pass
// after pass, while the router keeps advertising the prefix: its
// conditions (Ready, Degraded, PoolsSynced) frozen at what the token left,
// and a refused write retried for ever. (TestTheWritersStatusWriteIsAdmittedWhateverTheStatusHolds
// covers the current prefix in another text without an entry, and
// TestNoStatusAStolenWriterTokenLeavesStopsTheWriter's generator writes
// the new entry acquired now, with no PrefixAcquired time apart from it.)
func TestACurrentEntryInAnotherTextStopsNoStatusWrite(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"acquisition": map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0"}}})
	// The writer's own pass: PrefixAcquired True from passTime.
	if _, _, err := s.writerPass(t, "the first pass", []decide.Report{advertising(homePrefix)}, passTime); err != nil {
		t.Fatalf("the writer's first status write refused: %v", err)
	}
	later := passTime.Add(time.Hour).Format(time.RFC3339)
	body := `{"status":{"currentPrefix":"2001:db8:1:0::/64","history":[` +
		`{"prefix":"2001:db8:1:0::/64","state":"active","acquiredAt":"` + later + `"},` +
		`{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
	// renumber-writer-status compares the current prefix with the old one
	// as CIDRs: the renamed current entry keeps its acquiredAt.
	if err := s.patch(api.GVR, "", "home", body, "status"); err == nil {
		t.Errorf("the token's rename of the current prefix with its entry's acquiredAt moved was admitted")
	}
	// So the token first drops the current entry (the existing operator
	// writes none), then renames the current prefix with an entry of its
	// own, acquired when it likes.
	drop := `{"status":{"history":[{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
	if err := s.patch(api.GVR, "", "home", drop, "status"); err != nil {
		t.Fatalf("the token's write dropping the current entry refused (the finding needs it admitted): %v", err)
	}
	if err := s.patch(api.GVR, "", "home", body, "status"); err != nil {
		// renumber-writer-status now admits prefixes only in the text the
		// writer writes (red team r9a). The same status left by hand, or
		// by a token before that rule, is still one the writer carries on
		// from.
		t.Logf("the token's write refused (held): %v", err)
		if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(s.ctx, "home", types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		now := passTime.Add(2*time.Hour + time.Duration(i)*time.Minute)
		st, wrote, err := s.writerPass(t, "a pass after the token's write", []decide.Report{advertising(homePrefix)}, now)
		if err != nil {
			t.Errorf("pass %d after the token's write, the router still advertising %s: the writer's status write refused: %v\n(it wrote current %s, history %+v)", i+1, homePrefix, err, st.CurrentPrefix, st.History)
		}
		if !wrote {
			break
		}
	}
	// A renumbering is still written (the stall is the steady state's):
	// both of the current prefix's entries drain from the new one's
	// acquiredAt.
	if _, _, err := s.writerPass(t, "the renumbering", []decide.Report{advertising(renumberedPrefix)}, passTime.Add(3*time.Hour)); err != nil {
		t.Errorf("the renumbering's status write refused too: %v", err)
	}
}
