package controller

import (
	"slices"
	"testing"

	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/backends"
)

// A pool or a Service whose cache has not shown the writer's own last write
// to it is not written again from that cache: the write would be made
// against a version that is gone (the API server's 409, retried with
// backoff). The pass looks again; once the cache shows the write, the next
// pass writes it. Its caches lag on their own: the DynamicPrefix's may show
// the last status while a pool's and a Service's do not show the last patch.
func TestAPoolOrServiceWhoseCacheHasNotSeenItsOwnWriteIsNotWritten(t *testing.T) {
	f := converged(t, generous)
	pool, _, _ := f.pools.GetByKey("lb")
	svc, _, _ := f.svcs.GetByKey("default/web")

	f.report(3, prefixB, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != 0 {
		t.Fatalf("renumbering to B: wrote %q, looks again after %s; want %q", got, o.After, want)
	}
	f.catchUp()
	// The pool's and the Service's caches fall back to before that write.
	if err := f.pools.Update(pool.(*backends.Pool).Live); err != nil {
		t.Fatal(err)
	}
	if err := f.svcs.Update(svc); err != nil {
		t.Fatal(err)
	}

	f.report(3, "2001:db8:c::/64", prefixB, prefixA)
	want = []string{"patch dynamicprefixes/status home"}
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != apply.CacheBehind {
		t.Fatalf("renumbering to C before the caches showed B's writes: wrote %q, looks again after %s; want %q and a look again after %s",
			got, o.After, want, apply.CacheBehind)
	}
	f.catchUp()
	want = []string{"patch ciliumloadbalancerippools lb", "patch services web"} // the status names C already
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != 0 {
		t.Errorf("once the caches showed them: wrote %q, looks again after %s; want %q", got, o.After, want)
	}
}

// An allow-list waiting for its cache holds every address back, as one that
// could not be written does: no pool or Service gets a prefix the allow-list
// may not have yet.
func TestAnAllowListWhoseCacheHasNotSeenItsOwnWriteHoldsTheAddressesBack(t *testing.T) {
	f := converged(t, generous)
	withCIDRGroup(t, f) // its cache is never caught up here: it shows what the test put in
	if got, _ := f.pass(); !slices.Equal(got, []string{"patch ciliumcidrgroups lan"}) {
		t.Fatalf("the CIDR group's first pass wrote %q, want the group alone", got)
	}

	f.report(3, prefixB, prefixA)
	want := []string{"patch dynamicprefixes/status home"}
	if got, o := f.pass(); !slices.Equal(got, want) || o.After != apply.CacheBehind {
		t.Errorf("renumbering to B before the group's cache showed its write: wrote %q, looks again after %s; want %q and a look again after %s",
			got, o.After, want, apply.CacheBehind)
	}
}
