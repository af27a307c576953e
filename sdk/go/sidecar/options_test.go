package sidecar_test

import (
	"flag"
	"io"
	"testing"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

func TestBindFlags(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		args    []string
		want    int
		wantErr bool
	}{
		"if the flag is absent, then the size is the default": {want: sidecar.DefaultMaxMessageSize},
		"if the flag is a quantity, then it is read in bytes": {args: []string{"--max-message-size=16Mi"}, want: 16 << 20},
		"if the flag is a number, then it is bytes":           {args: []string{"--max-message-size=1048576"}, want: 1 << 20},
		"if the flag is not a size, then parsing fails":       {args: []string{"--max-message-size=big"}, wantErr: true},
		"if the flag is zero, then parsing fails":             {args: []string{"--max-message-size=0"}, wantErr: true},
		"if the flag is 2Gi or more, then parsing fails":      {args: []string{"--max-message-size=2Gi"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var opts sidecar.Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			opts.BindFlags(fs)
			err := fs.Parse(tc.args)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsing succeeded with size %d", opts.MaxMessageSize)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if opts.MaxMessageSize != tc.want {
				t.Errorf("size = %d, want %d", opts.MaxMessageSize, tc.want)
			}
		})
	}
}
