package benchmark

// Regenerate the Widget's deep copy functions and CRD after changing api/v1alpha1.
//go:generate ../../bin/controller-gen object:headerFile=../../hack/boilerplate.go.txt paths=./api/...
//go:generate ../../bin/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
