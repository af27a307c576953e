package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
)

// procStatusKiB reads a field of the process's /proc/<pid>/status, in KiB.
func procStatusKiB(t *testing.T, p *testenv.Process, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s in /proc/%d/status: %v", field, p.Pid(), err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.Pid())
	return 0
}

// resetPeakRSS resets the process's VmHWM to its current RSS (see proc(5),
// /proc/pid/clear_refs), so that VmHWM is the peak from here on.
func resetPeakRSS(t *testing.T, p *testenv.Process) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.Pid()), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
}
