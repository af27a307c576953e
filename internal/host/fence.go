package host

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/polyop/polyop/internal/fencing"
)

// leaderLock makes the leader election's Lease lock as controller-runtime's
// manager would, wrapped as the elected replica's fence (see
// fencing.LeaderLock); nil without leader election.
func leaderLock(cfg *rest.Config, id string, opts Options) (*fencing.LeaderLock, error) {
	if !opts.LeaderElection {
		return nil, nil
	}
	lock, err := leaderelection.NewResourceLock(cfg, noRecorders{}, leaderelection.Options{
		LeaderElection:          true,
		LeaderElectionID:        id,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		RenewDeadline:           opts.RenewDeadline,
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return fencing.NewLeaderLock(lock, opts.RenewDeadline), nil
}

// noRecorders gives the leader election's lock no recorder when it is made,
// before the manager: fencing.LeaderLock records its events through the
// manager's once there is one (SetRecorder).
type noRecorders struct{}

func (noRecorders) GetEventRecorderFor(string) record.EventRecorder { return nil }
func (noRecorders) GetEventRecorder(string) recorder.EventRecorder  { return nil }
