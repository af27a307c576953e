package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"os/exec"
	"strings"
	"testing"
)

// TestTheBinaryLeavesOutWhatPolyopDoesNotUse guards the two largest savings
// docs/releasing.md tells of ("What the binary is made of"): client-go's typed
// clientset and informer factory, which take 17 MB once any code calls
// kubernetes.NewForConfig or informers.NewSharedInformerFactory, and
// k8s.io/apiserver, which controller-runtime's metrics filter brings in. A
// change that links them again fails here; go run ./hack/binsize -why
// k8s.io/client-go/informers tells which import chain brings a package in.
func TestTheBinaryLeavesOutWhatPolyopDoesNotUse(t *testing.T) {
	t.Parallel()
	info, err := buildinfo.ReadFile(polyop)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range info.Deps {
		if m.Path == "k8s.io/apiserver" {
			t.Errorf("polyop links module %s", m.Path)
		}
	}

	out, err := exec.Command("go", "tool", "nm", polyop).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	unwanted := []string{"k8s.io/client-go/kubernetes.", "k8s.io/client-go/informers.", "k8s.io/client-go/informers/"}
	found := map[string]int{}
	for s := bufio.NewScanner(bytes.NewReader(out)); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 {
			continue
		}
		name := fields[len(fields)-1]
		for _, prefix := range unwanted {
			if strings.HasPrefix(name, prefix) {
				found[prefix]++
			}
		}
	}
	for prefix, n := range found {
		t.Errorf("polyop links %d symbols of %s*", n, prefix)
	}
}
