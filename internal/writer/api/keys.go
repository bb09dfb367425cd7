package api

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Key is an object's key in the writer's caches and queue (an informer's
// key): "name" or "namespace/name".
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Bare is m with only its identity: name, namespace, version, UID.
func Bare(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = m.Name, m.Namespace, m.ResourceVersion, m.UID
	return out
}
