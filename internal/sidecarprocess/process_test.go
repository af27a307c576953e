package sidecarprocess

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartSidecarKeepsTheSocketPathShortAndStopRemovesIt(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	p, err := StartSidecar([]string{"true"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(p.Address, "unix://")
	if len(path) > maxSocketPath {
		t.Errorf("socket path %s is %d bytes, over %d", path, len(path), maxSocketPath)
	}
	p.Stop()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("after Stop, %s: %v; want it removed", filepath.Dir(path), err)
	}
}

func TestTailBufferKeepsTheLastLines(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{limit: 64}
	for i := range 100 {
		_, _ = b.Write([]byte(strings.Repeat("x", i%7) + "line\n"))
	}
	_, _ = b.Write([]byte("last words\n"))
	got := b.tail(2)
	if !strings.HasSuffix(got, "line\nlast words") || strings.Count(got, "\n") != 1 {
		t.Errorf("tail(2) = %q; want the last two lines", got)
	}
	if len(b.buf) > 2*b.limit {
		t.Errorf("the buffer holds %d bytes, over twice its limit of %d", len(b.buf), b.limit)
	}
}
