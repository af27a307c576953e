package host

import (
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/testenv"
	testcerts "github.com/polyop/polyop/internal/testenv/certs"
	sdkaddress "github.com/polyop/polyop/sdk/go/address"
)

func TestClusterAddress(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		sidecar, cluster, want string
	}{
		"if unset beside the default sidecar socket, then the default":     {sidecar: sdkaddress.Default, want: "unix:///var/run/polyop/cluster.sock"},
		"if unset beside another unix socket, then beside it":              {sidecar: "unix:///tmp/x/sidecar.sock", want: "unix:///tmp/x/cluster.sock"},
		"if unset beside a relative unix socket, then beside it, absolute": {sidecar: "unix:run/sidecar.sock", want: "unix://" + testenv.WorkingDir(t) + "/run/cluster.sock"},
		"if set to a relative unix socket, then absolute":                  {sidecar: sdkaddress.Default, cluster: "unix:c.sock", want: "unix://" + testenv.WorkingDir(t) + "/c.sock"},
		"if unset with a TCP sidecar, then the default":                    {sidecar: "localhost:9000", want: "unix:///var/run/polyop/cluster.sock"},
		"if set, then as set": {sidecar: sdkaddress.Default, cluster: "tcp://127.0.0.1:9001", want: "tcp://127.0.0.1:9001"},
		"if 0, then none":     {sidecar: sdkaddress.Default, cluster: "0", want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := NewOptions()
			opts.SidecarAddress, opts.ClusterAddress = tc.sidecar, tc.cluster
			if got := clusterAddress(opts); got != tc.want {
				t.Errorf("clusterAddress = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClusterServiceTLS(t *testing.T) {
	t.Parallel()
	m := testcerts.NewMutualTLS(t)
	for name, tc := range map[string]struct {
		address, cert, key, ca string
		wantTLS                bool
		wantErr                []string
	}{
		"if the address is a unix socket, then plain text":            {address: "unix:///tmp/c.sock"},
		"if the address is loopback, then plain text":                 {address: "tcp://127.0.0.1:9000"},
		"if no cluster service is served, then nothing":               {address: "0"},
		"if the address is on the network without TLS, then refused":  {address: "tcp://0.0.0.0:9000", wantErr: []string{"--cluster-address=tcp://0.0.0.0:9000", "--cluster-tls-cert-file, --cluster-tls-key-file and --cluster-tls-client-ca-file"}},
		"if the address is every interface without TLS, then refused": {address: ":9000", wantErr: []string{"--cluster-tls-cert-file"}},
		"if the address is on the network with TLS, then mutual TLS":  {address: "tcp://0.0.0.0:9000", cert: m.ServerCertFile, key: m.ServerKeyFile, ca: m.CAFile, wantTLS: true},
		"if some TLS flags are set but not all, then refused":         {address: "tcp://0.0.0.0:9000", cert: m.ServerCertFile, key: m.ServerKeyFile, wantErr: []string{"all of", "or none"}},
		"if a TLS file cannot be read, then refused":                  {address: "tcp://0.0.0.0:9000", cert: "/nonexistent.crt", key: m.ServerKeyFile, ca: m.CAFile, wantErr: []string{"certificate"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := NewOptions()
			opts.ClusterAddress, opts.ClusterTLSCertFile, opts.ClusterTLSKeyFile, opts.ClusterTLSClientCAFile = tc.address, tc.cert, tc.key, tc.ca
			cfg, err := clusterServiceTLS(opts, clusterAddress(opts))
			if len(tc.wantErr) > 0 {
				for _, want := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("error = %v, want one containing %q", err, want)
					}
				}
				return
			}
			if err != nil || (cfg != nil) != tc.wantTLS {
				t.Errorf("clusterServiceTLS = %v, %v; want TLS %v", cfg, err, tc.wantTLS)
			}
		})
	}
}
