package run

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// console serialises everything the command and its child processes print,
// so that lines from different sources never interleave mid-line.
type console struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
}

// printf prints one of the command's own progress lines.
func (c *console) printf(format string, args ...any) {
	c.write(c.stdout, "[run] "+fmt.Sprintf(format, args...)+"\n")
}

// errorf prints one of the command's own error lines.
func (c *console) errorf(format string, args ...any) {
	c.write(c.stderr, "[run] error: "+fmt.Sprintf(format, args...)+"\n")
}

// block prints text as it is, ending it with a newline when it has none.
func (c *console) block(text string) {
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	c.write(c.stdout, text)
}

func (c *console) write(w io.Writer, s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(w, s)
}

// prefixed returns writers for a child process's standard output and standard
// error that print each of its lines after prefix. Close them once the
// process is done, to print a last line that has no newline.
func (c *console) prefixed(prefix string) (stdout, stderr *prefixWriter) {
	return &prefixWriter{c: c, w: c.stdout, prefix: prefix}, &prefixWriter{c: c, w: c.stderr, prefix: prefix}
}

// prefixWriter is an io.Writer that prints whole lines, each after a prefix.
type prefixWriter struct {
	c      *console
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.c.write(p.w, p.prefix+string(p.buf[:i+1]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// Close prints what is left of a last line that had no newline.
func (p *prefixWriter) Close() error {
	if len(p.buf) > 0 {
		p.c.write(p.w, p.prefix+string(p.buf)+"\n")
		p.buf = nil
	}
	return nil
}
