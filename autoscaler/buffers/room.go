package buffers

import (
	"context"
	"errors"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/loopstep"
	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/placement"
)

// Serve is the loop's CapacityBuffer step: it reads the buffers, sets
// their status and makes the pods of those ready (Run), then places the
// pods that fit in the loop's shared simulation when no real pod is
// pending. The Loop is nil when the buffers cannot be listed; every
// error of the step is in the one returned.
func Serve(ctx context.Context, cfg Config, l loopstep.Loop) (*Loop, error) {
	b, err := Run(ctx, cfg, l.State().Objects, l.Now())
	if err != nil {
		return nil, err
	}
	return b, errors.Join(append(b.Errors, b.PlaceInSharedSimulation(ctx, l))...)
}

// PodCount counts the loop's buffer pods; 0 when buffers are not served
// (a nil Loop).
func (b *Loop) PodCount() int {
	if b == nil {
		return 0
	}
	return len(b.Pods)
}

// PlaceInSharedSimulation places the buffer pods in the loop's shared
// simulation, first fit, when no real pod is pending: scale-up and
// scale-down would each place them alike after the pending pods (none),
// so they are placed once, and only those that do not fit are planned
// for (Unplaced). With real pods pending each step places them after
// those.
func (b *Loop) PlaceInSharedSimulation(ctx context.Context, l loopstep.Loop) error {
	st := l.State()
	if b.PodCount() == 0 || len(st.Unschedulable) > 0 || len(st.BindingNodeUnknown) > 0 {
		return nil
	}
	sim, err := l.SharedSimulation(ctx)
	if err != nil {
		return err
	}
	p := l.Planner(sim, nil)
	p.FirstFit = true
	plan, err := p.PlanContext(ctx, b.Pods)
	if err != nil {
		return err
	}
	left := map[string]bool{}
	for _, n := range plan.NoScaleUp {
		left[n.Pod.String()] = true
	}
	for _, pod := range b.Pods {
		if left[pod.Namespace+"/"+pod.Name] {
			b.unplaced = append(b.unplaced, pod)
		}
	}
	b.inShared = true
	return nil
}

// Unplaced are the buffer pods scale-up plans for: those not placed in
// the shared simulation.
func (b *Loop) Unplaced() []*v1.Pod {
	if b == nil {
		return nil
	}
	if b.inShared {
		return b.unplaced
	}
	return b.Pods
}

// HoldRoom keeps the buffers' room in a scale-down simulation: their pods
// go where they fit, first fit, after the pending pods (which take free
// room first), so a node holding a buffer's room is in use. They are
// safe to evict: a node whose buffer pods fit elsewhere may go.
func (b *Loop) HoldRoom(ctx context.Context, l loopstep.Loop, sim *placement.Engine) {
	if b.PodCount() == 0 || b.inShared {
		return
	}
	p := l.Planner(sim, nil)
	p.FirstFit = true
	if _, err := p.PlanContext(ctx, b.Pods); err != nil {
		klog.FromContext(ctx).Error(err, "Placing CapacityBuffers' pods for scale-down")
	}
}

// Events gathers, per buffer, what a scale-up made of its pods: a buffer
// gets one event, its pods none (CA's TriggeredScaleUp and
// NotTriggerScaleUp on the buffer).
type Events struct {
	buffers   *Loop
	recorder  record.EventRecorder
	triggers  map[string]map[string]int // buffer -> groups text -> pods
	notTriggs map[string]map[string]int // buffer -> reason -> pods
}

// NewEvents gathers the events of b's buffers (b nil: none served).
func NewEvents(b *Loop, recorder record.EventRecorder) *Events {
	return &Events{buffers: b, recorder: recorder, triggers: map[string]map[string]int{}, notTriggs: map[string]map[string]int{}}
}

func (e *Events) key(pod *v1.Pod) (string, bool) {
	if !cb.IsBufferPod(pod) {
		return "", false
	}
	return pod.Namespace + "/" + cb.BufferOf(pod), true
}

// Triggered records a buffer pod helped by the scale-up; false for other
// pods.
func (e *Events) Triggered(pod *v1.Pod, groups string) bool {
	k, ok := e.key(pod)
	if ok {
		add(e.triggers, k, groups)
	}
	return ok
}

// NotTriggered records a buffer pod no scale-up helps; false for other
// pods.
func (e *Events) NotTriggered(pod *v1.Pod, reason string) bool {
	k, ok := e.key(pod)
	if ok {
		add(e.notTriggs, k, reason)
	}
	return ok
}

func add(m map[string]map[string]int, k, v string) {
	if m[k] == nil {
		m[k] = map[string]int{}
	}
	m[k][v]++
}

// Emit sends each buffer its event.
func (e *Events) Emit() {
	if e.buffers == nil || e.recorder == nil {
		return
	}
	e.emit(e.triggers, loopstep.EventTriggeredScaleUp, "capacity buffer %d fake pods triggered scale-up: [%s]")
	e.emit(e.notTriggs, loopstep.EventNotTriggerScaleUp, "capacity buffer %d fake pods didn't trigger scale-up: %s")
}

// emit sends each buffer of byBuffer one event: its pods counted, and
// their groups or reasons.
func (e *Events) emit(byBuffer map[string]map[string]int, reason, format string) {
	for k, counts := range byBuffer {
		b := e.buffers.Buffers[k]
		if b == nil {
			continue
		}
		n, texts := summary(counts)
		e.recorder.Eventf(Ref(b), v1.EventTypeNormal, reason, format, n, texts)
	}
}

func summary(counts map[string]int) (int, string) {
	n := 0
	keys := make([]string, 0, len(counts))
	for k, c := range counts {
		n += c
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return n, strings.Join(keys, ",")
}
