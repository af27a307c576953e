package sidecarprocess

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/scaffold"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/version"
)

// Describe builds the project's sidecar (its sidecar.build, in root),
// starts it (sidecar.command) and returns its description, as polyop
// generate asks for it: startTimeout bounds the wait for it to serve, and
// sidecarLogs copies the build's and the sidecar's output to errOut as they
// come (otherwise only an error shows their end).
func Describe(ctx context.Context, p *scaffold.Project, root string, startTimeout time.Duration, sidecarLogs bool, errOut io.Writer) (*description.Description, error) {
	var logs io.Writer
	if sidecarLogs {
		logs = errOut
	}
	if build := p.Sidecar.Build; len(build) > 0 {
		fmt.Fprintf(errOut, "building the sidecar: %s\n", strings.Join(build, " "))
		output := &tailBuffer{limit: 16 << 10}
		var w io.Writer = output
		if logs != nil {
			w = io.MultiWriter(output, logs)
		}
		if err := Build(ctx, p, root, w, w); err != nil {
			return nil, fmt.Errorf("%w%s", err, outputNote(output.tail(20)))
		}
	}
	fmt.Fprintf(errOut, "asking the sidecar to describe itself: %s\n", strings.Join(p.Sidecar.Command, " "))
	proc, err := StartSidecarIn(root, p.Sidecar.Command, logs, "")
	if err != nil {
		return nil, err
	}
	defer proc.Stop()
	sc, err := sidecar.New(sidecar.Options{Address: proc.Address})
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	command := strings.Join(p.Sidecar.Command, " ")
	if err := WaitServing(ctx, sc, proc.Done(), startTimeout); err != nil {
		select {
		case <-proc.Done():
			return nil, fmt.Errorf("the sidecar exited before it served (the PROJECT file's sidecar.command, in %s): %w", root, proc.ExitedError())
		default:
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the sidecar command %q (the PROJECT file's sidecar.command, in %s) did not serve on %s: %w (it must serve on the address given with %s)%s",
			command, root, proc.Address, err, AddressFlag, proc.OutputNote())
	}
	desc, err := sc.Describe(ctx, version.Version)
	if err != nil {
		return nil, fmt.Errorf("the sidecar command %q did not describe itself: %w%s", command, err, proc.OutputNote())
	}
	return desc, nil
}

// outputNote is the end of a command's output, tail, for an error message.
func outputNote(tail string) string {
	if tail == "" {
		return " (it printed nothing)"
	}
	return "; the end of its output:\n" + tail
}
