package backends

import (
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func policy(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: lan, namespace: home}\nspec:\n"+spec), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func rendered(t *testing.T, spec map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const homePolicy = `
  podSelector: {}
  policyTypes: [Ingress, Egress]
  ingress:
    - from:
        - ipBlock: {cidr: 2001:db8:1::/64, except: [2001:db8:1::ff00:0/120]}
        - ipBlock: {cidr: 192.168.1.0/24}
        - podSelector: {matchLabels: {app: web}}
      ports: [{port: 443}]
    - from:
        - namespaceSelector: {}
  egress:
    - to:
        - ipBlock: {cidr: 2001:db8:1::/64}
`

// TestAPolicyFollowsInEveryRuleThatHeldThePrefix: the rules that held our
// CIDR get the new one (except moved along) beside the draining one; the
// user's peers, ports and other rules stay as they are.
func TestAPolicyFollowsInEveryRuleThatHeldThePrefix(t *testing.T) {
	u := policy(t, homePolicy)
	k := NetworkPolicyKind()
	if !k.ClaimExact {
		t.Error("a policy's ipBlock inside the prefix (one host) would be claimed and widened to the prefix")
	}
	entries, err := k.Entries(u, "")
	if err != nil || !slices.Equal(entries, []string{"2001:db8:1::/64", "192.168.1.0/24"}) {
		t.Fatalf("entries %q, %v", entries, err)
	}
	spec, err := k.Place(u, []string{"2001:db8:1::/64"}, []string{"2001:db8:2::/64", "2001:db8:1::/64"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `egress:
- to:
  - ipBlock:
      cidr: 2001:db8:2::/64
  - ipBlock:
      cidr: 2001:db8:1::/64
ingress:
- from:
  - ipBlock:
      cidr: 192.168.1.0/24
  - podSelector:
      matchLabels:
        app: web
  - ipBlock:
      cidr: 2001:db8:2::/64
      except:
      - 2001:db8:2::ff00:0/120
  - ipBlock:
      cidr: 2001:db8:1::/64
      except:
      - 2001:db8:1::ff00:0/120
  ports:
  - port: 443
- from:
  - namespaceSelector: {}
`
	if got := rendered(t, spec); got != want {
		t.Errorf("placed:\n%s\nwant:\n%s", got, want)
	}
	if _, err := yaml.Marshal(u.Object); err != nil || len(u.Object["spec"].(map[string]any)["egress"].([]any)[0].(map[string]any)["to"].([]any)) != 1 {
		t.Error("Place changed the live object")
	}
}

// TestAPolicyNeverOpensARule: a write that would leave a following rule
// without peers (an empty from admits everyone) is refused; a release leaves
// such a rule as it is.
func TestAPolicyNeverOpensARule(t *testing.T) {
	u := policy(t, homePolicy)
	k := NetworkPolicyKind()
	if _, err := k.Place(u, []string{"2001:db8:1::/64"}, nil, false); !errors.Is(err, ErrRuleWouldOpen) {
		t.Errorf("emptying the egress rule: %v, want ErrRuleWouldOpen", err)
	}
	spec, err := k.Place(u, []string{"2001:db8:1::/64"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	got := rendered(t, spec)
	want := `egress:
- to:
  - ipBlock:
      cidr: 2001:db8:1::/64
ingress:
- from:
  - ipBlock:
      cidr: 192.168.1.0/24
  - podSelector:
      matchLabels:
        app: web
  ports:
  - port: 443
- from:
  - namespaceSelector: {}
`
	if got != want {
		t.Errorf("released:\n%s\nwant:\n%s", got, want)
	}
}

func TestExceptEntriesMoveWithTheirBlock(t *testing.T) {
	for _, c := range []struct {
		except   []string
		from, to string
		want     []string
	}{
		{[]string{"2001:db8:1:100::ff00:0/120"}, "2001:db8:1:100::/64", "2001:db8:2:200::/64", []string{"2001:db8:2:200::ff00:0/120"}},
		{[]string{"2001:db8:1:170::/60"}, "2001:db8:1:100::/56", "2001:db8:2:200::/56", []string{"2001:db8:2:270::/60"}},
		{[]string{"2001:db8:9::/64", "2001:db8:1::/48"}, "2001:db8:1:100::/56", "2001:db8:2:200::/56", nil}, // outside, or wider
		{[]string{"2001:db8:1:100::1/128"}, "2001:db8:1:100::/64", "2001:db8:2:200::/60", nil},              // lengths differ
	} {
		if got := moveExcept(c.except, c.from, c.to); !slices.Equal(got, c.want) {
			t.Errorf("moveExcept(%q, %s, %s) = %q, want %q", c.except, c.from, c.to, got, c.want)
		}
	}
}

// TestAPolicyWithNoFollowingRuleIsNotWritten: when no rule names the
// followed prefix, there is nowhere to write: an error the pass reports,
// never a write of the record alone (which would be repeated every pass).
func TestAPolicyWithNoFollowingRuleIsNotWritten(t *testing.T) {
	u := policy(t, homePolicy)
	k := NetworkPolicyKind()
	if _, err := k.Place(u, nil, []string{"2001:db8:9::/64"}, false); !errors.Is(err, ErrNoRuleFollows) {
		t.Errorf("no rule follows: %v, want ErrNoRuleFollows", err)
	}
}

// TestAPolicyTakesOutABlockOnlyAsTheRecordSpellsIt (red team r8, F1):
// renumber-writer-pools compares a rule's ipBlocks with the record as
// strings, so a stolen writer token may add 2001:DB8:2:0:5::/80 beside the
// user's 2001:db8:2:0:5::/80 in a following rule and record it. The
// writer's write takes out the token's block, as the record spells it, and
// keeps the user's: owned by value, both went, and the API server refused
// that write (an unrecorded removal) and every one after it.
func TestAPolicyTakesOutABlockOnlyAsTheRecordSpellsIt(t *testing.T) {
	u := policy(t, `
  podSelector: {}
  policyTypes: [Egress]
  egress:
    - to:
        - ipBlock: {cidr: 2001:db8:1::/64}
        - ipBlock: {cidr: 2001:db8:2:0:5::/80}
        - ipBlock: {cidr: 2001:DB8:2:0:5::/80}
`)
	k := NetworkPolicyKind()
	entries, err := k.Entries(u, "")
	if want := []string{"2001:db8:1::/64", "2001:db8:2:0:5::/80", "2001:DB8:2:0:5::/80"}; err != nil || !slices.Equal(entries, want) {
		t.Fatalf("entries %q, %v; want each spelling as it is", entries, err)
	}
	spec, err := k.Place(u, []string{"2001:db8:1::/64", "2001:DB8:2:0:5::/80"}, []string{"2001:db8:1::/64"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `egress:
- to:
  - ipBlock:
      cidr: 2001:db8:2:0:5::/80
  - ipBlock:
      cidr: 2001:db8:1::/64
`
	if got := rendered(t, spec); got != want {
		t.Errorf("placed:\n%s\nwant:\n%s", got, want)
	}
}
