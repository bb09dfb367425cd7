package manifests_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// Every field of status.dhcpv6pd the writer writes is in the CRD's schema:
// the API server prunes one that is not, so the status read back never
// equals the status wanted and the writer writes it again at every pass
// (nothing may be written at rest), and what it carries (a backing's
// backedAgainst, say) is lost between passes.
func TestTheCRDServesEveryDHCPv6PDStatusField(t *testing.T) {
	crd := dynamicPrefixCRD(t)
	typ := reflect.TypeFor[dynamicprefix.DHCPv6PDStatus]()
	for _, v := range crd.Spec.Versions {
		node := v.Schema.OpenAPIV3Schema
		for _, p := range []string{"status", "dhcpv6pd"} {
			props, _ := node["properties"].(map[string]any)
			node, _ = props[p].(map[string]any)
		}
		props, _ := node["properties"].(map[string]any)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if _, ok := props[name]; !ok {
				t.Errorf("%s: status.dhcpv6pd.%s (%s) is not in the schema: the API server prunes it", v.Name, name, typ.Field(i).Name)
			}
		}
	}
}
