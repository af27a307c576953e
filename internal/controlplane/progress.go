package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// progress reads the output of `go build -v`, which names each package as it
// is compiled, and reports how many it has seen and for how long the build
// has run. Any other line (a compile error, a download) is kept for the error
// message.
//
// go build -v prints nothing while it links, which takes the better part of
// a minute for kube-apiserver: so that the build does not look stuck then,
// progress reports the binaries being linked. go build compiles a binary's
// main package once every package it imports is compiled, and links the
// binary right after; the binary is at its -o path once linked. A binary is
// being linked from when its main package is named until it is there.
type progress struct {
	what   string
	printf func(format string, args ...any)
	start  time.Time
	now    func() time.Time
	// binaries maps the import path of each binary's main package to the
	// path go build writes the binary to.
	binaries map[string]string

	mu       sync.Mutex
	packages int
	mains    []string // the main packages of binaries named so far, in order
	partial  []byte
	other    []string
}

// maxOtherLines is how many lines other than package names progress keeps.
const maxOtherLines = 40

// newProgress returns the progress of the build of what, which writes each
// binary whose main package binaries names to the path it maps it to.
func newProgress(what string, binaries map[string]string, printf func(string, ...any)) *progress {
	return &progress{what: what, binaries: binaries, printf: printf, start: time.Now(), now: time.Now}
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.line(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// line counts a package name and keeps anything else.
func (p *progress) line(l string) {
	l = strings.TrimSpace(l)
	switch {
	case l == "":
	case isPackagePath(l):
		p.packages++
		if _, ok := p.binaries[l]; ok {
			p.mains = append(p.mains, l)
		}
	default:
		p.other = append(p.other, l)
		if len(p.other) > maxOtherLines {
			p.other = p.other[len(p.other)-maxOtherLines:]
		}
	}
}

// isPackagePath tells a line of `go build -v` that names a package from
// anything else: a package path has no spaces and does not start with "#"
// (the header of a package's compile errors).
func isPackagePath(l string) bool {
	return !strings.ContainsAny(l, " \t") && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "go:")
}

// report prints how far the build is, and which binaries it is linking.
func (p *progress) report() {
	p.mu.Lock()
	n := p.packages
	mains := slices.Clone(p.mains)
	p.mu.Unlock()
	var linking []string
	for _, pkg := range mains {
		if path := p.binaries[pkg]; !exists(path) {
			linking = append(linking, filepath.Base(path))
		}
	}
	if len(linking) > 0 {
		p.printf("building %s: %d packages compiled, linking %s, %s elapsed", p.what, n, strings.Join(linking, ", "), p.elapsed())
		return
	}
	p.printf("building %s: %d packages compiled, %s elapsed", p.what, n, p.elapsed())
}

// exists tells whether a file is at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// done prints that the build finished.
func (p *progress) done() {
	p.mu.Lock()
	n := p.packages
	p.mu.Unlock()
	p.printf("built %s in %s (%d packages compiled)", p.what, p.elapsed(), n)
}

func (p *progress) elapsed() time.Duration {
	return p.now().Sub(p.start).Round(time.Second)
}

// every reports the progress every interval until the returned function is
// called.
func (p *progress) every(interval time.Duration) (stop func()) {
	return every(interval, p.report)
}

// every calls f every interval until the returned function is called, and
// returns once f is no longer running.
func every(interval time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// outputNote is what the build printed besides package names, for an error.
func (p *progress) outputNote() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	other := p.other
	if len(p.partial) > 0 {
		other = append(other, string(p.partial))
	}
	if len(other) == 0 {
		return ""
	}
	return fmt.Sprintf("; go build printed:\n%s", strings.Join(other, "\n"))
}
