package conditions_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/sdk/go/conditions"
)

var earlier = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func ready(status metav1.ConditionStatus, reason string, generation int64) metav1.Condition {
	return metav1.Condition{
		Type:               conditions.Ready,
		Status:             status,
		Reason:             reason,
		Message:            "message",
		ObservedGeneration: generation,
		LastTransitionTime: earlier,
	}
}

func TestMark(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		before      []metav1.Condition
		mark        func(*[]metav1.Condition) bool
		wantChanged bool
		wantStatus  metav1.ConditionStatus
		wantReason  string
		// wantKeptTime is true when lastTransitionTime must not move.
		wantKeptTime bool
	}{
		"if the condition is absent, then MarkTrue adds it": {
			mark: func(c *[]metav1.Condition) bool {
				return conditions.MarkTrue(c, conditions.Ready, "Done", "message", 1)
			},
			wantChanged: true, wantStatus: metav1.ConditionTrue, wantReason: "Done",
		},
		"if the condition is already true with the same fields, then MarkTrue changes nothing": {
			before: []metav1.Condition{ready(metav1.ConditionTrue, "Done", 1)},
			mark: func(c *[]metav1.Condition) bool {
				return conditions.MarkTrue(c, conditions.Ready, "Done", "message", 1)
			},
			wantChanged: false, wantStatus: metav1.ConditionTrue, wantReason: "Done", wantKeptTime: true,
		},
		"if only the generation moves, then the transition time is kept": {
			before: []metav1.Condition{ready(metav1.ConditionTrue, "Done", 1)},
			mark: func(c *[]metav1.Condition) bool {
				return conditions.MarkTrue(c, conditions.Ready, "Done", "message", 2)
			},
			wantChanged: true, wantStatus: metav1.ConditionTrue, wantReason: "Done", wantKeptTime: true,
		},
		"if the status flips, then MarkFalse moves the transition time": {
			before: []metav1.Condition{ready(metav1.ConditionTrue, "Done", 1)},
			mark: func(c *[]metav1.Condition) bool {
				return conditions.MarkFalse(c, conditions.Ready, "Broken", "message", 1)
			},
			wantChanged: true, wantStatus: metav1.ConditionFalse, wantReason: "Broken",
		},
		"if the status is unknown, then MarkUnknown records it": {
			mark: func(c *[]metav1.Condition) bool {
				return conditions.MarkUnknown(c, conditions.Ready, "Waiting", "message", 1)
			},
			wantChanged: true, wantStatus: metav1.ConditionUnknown, wantReason: "Waiting",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conds := append([]metav1.Condition(nil), tc.before...)
			if got := tc.mark(&conds); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			c := conditions.Get(conds, conditions.Ready)
			if c == nil {
				t.Fatal("the Ready condition is missing")
			}
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Errorf("got %s/%s, want %s/%s", c.Status, c.Reason, tc.wantStatus, tc.wantReason)
			}
			if kept := c.LastTransitionTime.Equal(&earlier); kept != tc.wantKeptTime {
				t.Errorf("lastTransitionTime kept = %v, want %v (it is %s)", kept, tc.wantKeptTime, c.LastTransitionTime)
			}
			if c.LastTransitionTime.IsZero() {
				t.Error("lastTransitionTime is not set")
			}
		})
	}
}

func TestSetKeepsAGivenTransitionTime(t *testing.T) {
	t.Parallel()
	var conds []metav1.Condition
	conditions.Set(&conds, ready(metav1.ConditionFalse, "Starting", 1))
	if got := conditions.Get(conds, conditions.Ready).LastTransitionTime; !got.Equal(&earlier) {
		t.Errorf("lastTransitionTime = %s, want %s", got, earlier)
	}
}

func TestPredicates(t *testing.T) {
	t.Parallel()
	conds := []metav1.Condition{
		ready(metav1.ConditionTrue, "Done", 1),
		{Type: conditions.Degraded, Status: metav1.ConditionFalse, Reason: "Fine", LastTransitionTime: earlier},
		{Type: "Progressing", Status: metav1.ConditionUnknown, Reason: "Waiting", LastTransitionTime: earlier},
	}
	tests := map[string]struct {
		got, want bool
	}{
		"if Ready is True, then IsTrue(Ready) is true":            {conditions.IsTrue(conds, conditions.Ready), true},
		"if Ready is True, then IsFalse(Ready) is false":          {conditions.IsFalse(conds, conditions.Ready), false},
		"if Degraded is False, then IsFalse(Degraded) is true":    {conditions.IsFalse(conds, conditions.Degraded), true},
		"if Degraded is False, then IsUnknown(Degraded) is false": {conditions.IsUnknown(conds, conditions.Degraded), false},
		"if a condition is Unknown, then IsUnknown is true":       {conditions.IsUnknown(conds, "Progressing"), true},
		"if a condition is absent, then IsUnknown is true":        {conditions.IsUnknown(conds, "Missing"), true},
		"if a condition is absent, then IsTrue is false":          {conditions.IsTrue(conds, "Missing"), false},
		"if a condition is absent, then IsFalse is false":         {conditions.IsFalse(conds, "Missing"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	conds := []metav1.Condition{ready(metav1.ConditionTrue, "Done", 1)}
	if !conditions.Remove(&conds, conditions.Ready) {
		t.Error("Remove of a present condition reported false")
	}
	if conditions.Get(conds, conditions.Ready) != nil {
		t.Error("the condition is still there")
	}
	if conditions.Remove(&conds, conditions.Ready) {
		t.Error("Remove of an absent condition reported true")
	}
}
