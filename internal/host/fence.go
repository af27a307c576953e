package host

import (
	"context"
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/polyop/polyop/internal/fencing"
)

// leaderLock makes the leader election's Lease lock as controller-runtime's
// manager would, wrapped as the elected replica's fence (see
// fencing.LeaderLock); nil without leader election.
func leaderLock(cfg *rest.Config, p *plan) (*fencing.LeaderLock, error) {
	if !p.opts.LeaderElection {
		return nil, nil
	}
	lock, err := leaderelection.NewResourceLock(cfg, noRecorders{}, leaderelection.Options{
		LeaderElection:          true,
		LeaderElectionID:        p.leaderElectionID,
		LeaderElectionNamespace: p.opts.LeaderElectionNamespace,
		RenewDeadline:           p.opts.RenewDeadline,
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return fencing.NewLeaderLock(lock, p.opts.RenewDeadline), nil
}

// noRecorders gives the leader election's lock no recorder when it is made,
// before the manager: fencing.LeaderLock records its events through the
// manager's once there is one (SetRecorder).
type noRecorders struct{}

func (noRecorders) GetEventRecorderFor(string) record.EventRecorder { return nil }
func (noRecorders) GetEventRecorder(string) recorder.EventRecorder  { return nil }

// fencedEvents records the controllers' Events (events.k8s.io, as the
// manager's recorders do) through a sink that writes only while fence holds
// its term: an Event recorded just before a pause past the lease is not
// sent when the replica resumes, as the manager's queue would send it. It is
// a manager.Runnable: the Events are sent while the manager runs.
type fencedEvents struct {
	broadcaster events.EventBroadcaster
	scheme      *runtime.Scheme
}

func newFencedEvents(cs eventsv1client.EventsV1Interface, scheme *runtime.Scheme, fence fencing.Fence) *fencedEvents {
	sink := &fencedSink{EventSink: &events.EventSinkImpl{Interface: cs}, fence: fence}
	return &fencedEvents{broadcaster: events.NewBroadcaster(sink), scheme: scheme}
}

// recorder is the recorder of the controller named name.
func (f *fencedEvents) recorder(name string) recorder.EventRecorder {
	return f.broadcaster.NewRecorder(f.scheme, name).(recorder.EventRecorder)
}

// NeedLeaderElection is false: it sends whatever the controllers record.
func (f *fencedEvents) NeedLeaderElection() bool { return false }

// Start sends the recorded Events until ctx ends.
func (f *fencedEvents) Start(ctx context.Context) error {
	if err := f.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	f.broadcaster.Shutdown()
	return nil
}

// fencedSink writes an Event only while the fence holds its term; otherwise
// it refuses it with an error the broadcaster does not retry.
type fencedSink struct {
	events.EventSink
	fence fencing.Fence
}

func (s *fencedSink) refused(e *eventsv1.Event) error {
	t := s.fence.Term()
	if t.Valid() {
		return nil
	}
	return apierrors.NewForbidden(eventsv1.Resource("events"), e.Name,
		fmt.Errorf("not sent: the replica does not hold %s (term %d), and an Event recorded before it lost it may be stale", t.Lease, t.Number))
}

func (s *fencedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := s.refused(e); err != nil {
		return nil, err
	}
	return s.EventSink.Create(ctx, e)
}

func (s *fencedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := s.refused(e); err != nil {
		return nil, err
	}
	return s.EventSink.Update(ctx, e)
}

func (s *fencedSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if err := s.refused(e); err != nil {
		return nil, err
	}
	return s.EventSink.Patch(ctx, e, data)
}
