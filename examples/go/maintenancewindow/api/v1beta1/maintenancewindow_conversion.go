package v1beta1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
)

// ConvertTo converts this MaintenanceWindow to the hub version, v1.
func (src *MaintenanceWindow) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1.MaintenanceWindow)
	if !ok {
		return fmt.Errorf("the hub of MaintenanceWindow is *v1.MaintenanceWindow, not %T", dstRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = v1.MaintenanceWindowSpec{
		Start:    src.Spec.Schedule.Start,
		Every:    src.Spec.Schedule.Every,
		Duration: src.Spec.Duration,
		Paused:   src.Spec.Suspend,
	}
	dst.Status = v1.MaintenanceWindowStatus{
		Phase:              v1.MaintenanceWindowPhase(src.Status.Phase),
		CurrentWindowStart: src.Status.CurrentWindowStart.DeepCopy(),
		CurrentWindowEnd:   src.Status.CurrentWindowEnd.DeepCopy(),
		NextTransition:     src.Status.NextTransition.DeepCopy(),
		ObservedGeneration: src.Status.ObservedGeneration,
		Conditions:         copyConditions(src.Status.Conditions),
	}
	return nil
}

// ConvertFrom converts the hub version, v1, to this MaintenanceWindow.
func (dst *MaintenanceWindow) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1.MaintenanceWindow)
	if !ok {
		return fmt.Errorf("the hub of MaintenanceWindow is *v1.MaintenanceWindow, not %T", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = MaintenanceWindowSpec{
		Schedule: Schedule{Start: src.Spec.Start, Every: src.Spec.Every},
		Duration: src.Spec.Duration,
		Suspend:  src.Spec.Paused,
	}
	dst.Status = MaintenanceWindowStatus{
		Phase:              MaintenanceWindowPhase(src.Status.Phase),
		CurrentWindowStart: src.Status.CurrentWindowStart.DeepCopy(),
		CurrentWindowEnd:   src.Status.CurrentWindowEnd.DeepCopy(),
		NextTransition:     src.Status.NextTransition.DeepCopy(),
		ObservedGeneration: src.Status.ObservedGeneration,
		Conditions:         copyConditions(src.Status.Conditions),
	}
	return nil
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
