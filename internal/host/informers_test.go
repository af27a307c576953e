package host

import (
	"flag"
	"testing"
	"time"
)

func TestLeaderElectionFlagsDefaultToControllerRuntimes(t *testing.T) {
	t.Parallel()
	opts := NewOptions()
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	opts.BindFlags(fs)
	if opts.LeaseDuration != 15*time.Second || opts.RenewDeadline != 10*time.Second || opts.RetryPeriod != 2*time.Second {
		t.Errorf("defaults: lease %s, renew %s, retry %s; want controller-runtime's 15s, 10s, 2s", opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod)
	}
	if err := fs.Parse([]string{
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s",
	}); err != nil {
		t.Fatal(err)
	}
	if opts.LeaseDuration != 4*time.Second || opts.RenewDeadline != 3*time.Second || opts.RetryPeriod != time.Second {
		t.Errorf("after the flags: lease %s, renew %s, retry %s; want 4s, 3s, 1s", opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod)
	}
}
