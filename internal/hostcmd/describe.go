package hostcmd

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/version"
	sdkaddress "github.com/polyop/polyop/sdk/go/address"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// descriptionSource is where a subcommand reads the sidecar's description: a
// running sidecar, or a file holding `host describe`'s output.
type descriptionSource struct {
	address string
	file    string
	wait    time.Duration
}

func (s *descriptionSource) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.address, "sidecar-address", sdkaddress.Default, "Ask the sidecar at this address to describe itself.")
	fs.StringVar(&s.file, "description", "", "Read the description from this file (the JSON `host describe` prints) instead of asking a sidecar.")
	fs.DurationVar(&s.wait, "sidecar-wait-timeout", 30*time.Second, "How long to wait for the sidecar to be ready.")
}

// load returns the raw and the validated description.
func (s *descriptionSource) load(ctx context.Context) (*polyopv1alpha1.DescribeResponse, *description.Description, error) {
	var raw *polyopv1alpha1.DescribeResponse
	if s.file != "" {
		data, err := os.ReadFile(s.file)
		if err != nil {
			return nil, nil, err
		}
		raw = &polyopv1alpha1.DescribeResponse{}
		if err := protojson.Unmarshal(data, raw); err != nil {
			return nil, nil, fmt.Errorf("%s is not a sidecar description: %w", s.file, err)
		}
	} else {
		c, err := sidecar.New(sidecar.Options{Address: s.address})
		if err != nil {
			return nil, nil, err
		}
		defer c.Close()
		if err := c.WaitReady(ctx, s.wait, logr.Discard()); err != nil {
			return nil, nil, err
		}
		if raw, err = c.DescribeRaw(ctx, version.Version); err != nil {
			return nil, nil, err
		}
	}
	desc, err := description.NewDescription(raw)
	if err != nil {
		return nil, nil, err
	}
	return raw, desc, nil
}

// runDescribe prints the sidecar's description as JSON, to keep in a file for
// the other subcommands or to read.
func runDescribe(args []string) error {
	fs := flag.NewFlagSet("host describe", flag.ContinueOnError)
	var src descriptionSource
	src.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, _, err := src.load(context.Background())
	if err != nil {
		return err
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(raw)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}
