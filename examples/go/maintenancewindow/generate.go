package main

// Regenerate the deep copy functions and the CRD after changing api/v1 or
// api/v1beta1.
//go:generate ../../../bin/controller-gen object:headerFile=../../../hack/boilerplate.go.txt paths=./api/...
//go:generate ../../../bin/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
