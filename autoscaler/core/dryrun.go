package core

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// DryRunStatusConfigMapName is the status ConfigMap of a dry run unless
// --status-config-map-name says otherwise: beside an acting autoscaler
// (CA or draxr) it must not overwrite that one's status.
const DryRunStatusConfigMapName = "draxr-autoscaler-dry-run-status"

// dryRunRecorder sends every event of a dry run to the status ConfigMap,
// marked "dry run" and naming the object it is about: events on pods,
// nodes or MachineDeployments would read as an acting autoscaler's.
type dryRunRecorder struct {
	record.EventRecorder
	status *v1.ConfigMap
}

func (r *dryRunRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.EventRecorder.Event(r.status, eventtype, reason, r.mark(object, message))
}

func (r *dryRunRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *dryRunRecorder) AnnotatedEventf(object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// mark prefixes the message with "dry run" and the object it is about.
func (r *dryRunRecorder) mark(object runtime.Object, message string) string {
	if object == r.status {
		return "dry run: " + message
	}
	kind := object.GetObjectKind().GroupVersionKind().Kind
	if ref, ok := object.(*v1.ObjectReference); ok {
		kind = ref.Kind
		if ref.Namespace != "" {
			return fmt.Sprintf("dry run: %s %s/%s: %s", kind, ref.Namespace, ref.Name, message)
		}
		return fmt.Sprintf("dry run: %s %s: %s", kind, ref.Name, message)
	}
	m, err := meta.Accessor(object)
	if err != nil {
		return "dry run: " + message
	}
	if kind == "" {
		switch object.(type) {
		case *v1.Pod:
			kind = "Pod"
		case *v1.Node:
			kind = "Node"
		}
	}
	if m.GetNamespace() != "" {
		return fmt.Sprintf("dry run: %s %s/%s: %s", kind, m.GetNamespace(), m.GetName(), message)
	}
	return fmt.Sprintf("dry run: %s %s: %s", kind, m.GetName(), message)
}
