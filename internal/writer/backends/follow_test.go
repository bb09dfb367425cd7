package backends

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(annotations, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName("x")
	u.SetAnnotations(annotations)
	u.SetLabels(labels)
	return u
}

// The user's objects follow by annotation, the objects made for a
// DynamicPrefix by label; neither reads the other's key.
func TestWhichDynamicPrefixAnObjectFollows(t *testing.T) {
	ann := map[string]string{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "svc"}
	label := MadeFor("home", map[string]string{CalicoLabelManagedBy: CalicoManagedBy, LabelSiblingOf: "lb"})
	for _, tt := range []struct {
		name     string
		follows  func() (string, Role)
		wantDP   string
		wantRole Role
	}{
		{"a pool, annotated", func() (string, Role) { return groupKind().Follows(object(ann, nil)) }, "home", Follower},
		{"a pool, only labelled", func() (string, Role) { return groupKind().Follows(object(nil, label)) }, "", None},
		{"the user's Calico pool", func() (string, Role) { return CalicoFollows(object(ann, nil)) }, "home", Follower},
		{"a Calico sibling", func() (string, Role) { return CalicoFollows(object(nil, label)) }, "home", Made},
		{"an advertisement", func() (string, Role) { return AdvertisementFollows(object(nil, MadeFor("home", nil))) }, "home", Made},
		{"an annotated advertisement", func() (string, Role) { return AdvertisementFollows(object(ann, nil)) }, "", None},
		{"a Service", func() (string, Role) {
			s := &corev1.Service{}
			s.Annotations = ann
			return ServiceFollows(s)
		}, "home", Follower},
		{"a Service of nobody", func() (string, Role) { return ServiceFollows(&corev1.Service{}) }, "", None},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if dp, role := tt.follows(); dp != tt.wantDP || role != tt.wantRole {
				t.Errorf("(%q, %d), want (%q, %d)", dp, role, tt.wantDP, tt.wantRole)
			}
		})
	}
	if f := PoolFollowOf(object(ann, nil)); f.DynamicPrefix != "home" || f.Subnet != "svc" || f.AddressRange != "" {
		t.Errorf("PoolFollowOf = %+v", f)
	}
}
