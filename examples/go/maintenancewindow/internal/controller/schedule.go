package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
)

// schedule is a MaintenanceWindowSpec, parsed.
type schedule struct {
	start    time.Time
	duration time.Duration
	every    time.Duration // 0: the window opens once
}

// parseSchedule parses and validates a spec, reporting every problem it has.
func parseSchedule(spec v1.MaintenanceWindowSpec) (schedule, field.ErrorList) {
	var (
		s    schedule
		errs field.ErrorList
		err  error
		path = field.NewPath("spec")
	)
	if s.start, err = time.Parse(time.RFC3339, spec.Start); err != nil {
		errs = append(errs, field.Invalid(path.Child("start"), spec.Start, "must be an RFC 3339 time, such as 2026-01-01T00:00:00Z"))
	}
	if s.duration, err = time.ParseDuration(spec.Duration); err != nil {
		errs = append(errs, field.Invalid(path.Child("duration"), spec.Duration, "must be a duration, such as 2h or 90m"))
	} else if s.duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("duration"), spec.Duration, "must be positive"))
	}
	if spec.Every != "" {
		if s.every, err = time.ParseDuration(spec.Every); err != nil {
			errs = append(errs, field.Invalid(path.Child("every"), spec.Every, "must be a duration, such as 24h"))
		} else if s.every <= 0 {
			errs = append(errs, field.Invalid(path.Child("every"), spec.Every, "must be positive"))
		} else if s.duration > 0 && s.every < s.duration {
			errs = append(errs, field.Invalid(path.Child("every"), spec.Every,
				fmt.Sprintf("must not be shorter than spec.duration (%s): windows would overlap", spec.Duration)))
		}
	}
	return s, errs
}

// window is where a schedule stands at one instant.
type window struct {
	phase v1.MaintenanceWindowPhase // Pending, Active or Finished
	// start and end bound the open window; while Pending, the next one; when
	// Finished, the last one.
	start, end time.Time
	// next is when the phase changes next; zero when Finished.
	next time.Time
}

// at returns where the schedule stands at now. A window includes its start
// and excludes its end.
func (s schedule) at(now time.Time) window {
	if now.Before(s.start) {
		return window{phase: v1.PhasePending, start: s.start, end: s.start.Add(s.duration), next: s.start}
	}
	start := s.start
	if s.every > 0 {
		start = s.start.Add(now.Sub(s.start) / s.every * s.every)
	}
	end := start.Add(s.duration)
	switch {
	case now.Before(end):
		return window{phase: v1.PhaseActive, start: start, end: end, next: end}
	case s.every == 0:
		return window{phase: v1.PhaseFinished, start: start, end: end}
	default:
		next := start.Add(s.every)
		return window{phase: v1.PhasePending, start: next, end: next.Add(s.duration), next: next}
	}
}
