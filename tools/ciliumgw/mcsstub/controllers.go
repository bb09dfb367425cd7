// Package controllers stands in for sigs.k8s.io/mcs-api/controllers v0.5.2,
// which the module proxy does not serve: Cilium's Gateway API helpers read
// only this constant of it (the value upstream defines).
package controllers

// DerivedServiceAnnotation names the Service derived from a ServiceImport.
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
