package controller

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Discovery asks the API server which resources it serves in a group/version:
// one GET of /apis/<group>/<version>, all the writer asks. client-go's discovery
// client comes with the whole clientset and its OpenAPI and aggregated-discovery
// machinery.
type Discovery struct {
	client rest.Interface
}

// NewDiscovery returns a Discovery using cfg (its rate limits and transport).
func NewDiscovery(cfg *rest.Config) (*Discovery, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"}) // Status, for errors
	c := rest.CopyConfig(cfg)
	c.GroupVersion = nil
	c.APIPath = ""
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kube: discovery client: %w", err)
	}
	return &Discovery{client: client}, nil
}

// ServerResourcesForGroupVersion returns what group/version serves; a group or
// version the server does not serve is a NotFound error (apierrors.IsNotFound).
func (d *Discovery) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	body, err := d.client.Get().AbsPath("/apis", groupVersion).Do(context.TODO()).Raw()
	if err != nil {
		return nil, err
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(body, list); err != nil {
		return nil, fmt.Errorf("kube: decoding discovery of %s: %w", groupVersion, err)
	}
	list.GroupVersion = groupVersion
	return list, nil
}
