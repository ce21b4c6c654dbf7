package core

import (
	"context"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/buffers"
	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/placement"
)

// bufferPodCount counts this loop's buffer pods.
func (l *loop) bufferPodCount() int {
	if l.buffers == nil {
		return 0
	}
	return len(l.buffers.Pods)
}

// bufferRoom says whether this loop's buffer pods that fit are placed in
// the shared simulation itself, and which did not fit.
type bufferRoom struct {
	decided  bool
	inBase   bool
	unplaced []*v1.Pod
}

// placeBuffersInSharedSimulation places the buffer pods in the loop's shared
// simulation, first fit, when no real pod is pending: scale-up and
// scale-down would each place them alike after the pending pods (none),
// so they are placed once, and only those that do not fit are planned
// for. With real pods pending each step places them after those.
func (l *loop) placeBuffersInSharedSimulation(ctx context.Context) error {
	if l.bufferRoom.decided {
		return nil
	}
	l.bufferRoom.decided = true
	st := l.st
	if l.bufferPodCount() == 0 || len(st.Unschedulable) > 0 || len(st.BindingNodeUnknown) > 0 {
		return nil
	}
	sim, err := l.sharedSimulation(ctx)
	if err != nil {
		return err
	}
	p := l.planner(sim, st, nil)
	p.FirstFit = true
	plan, err := p.PlanContext(ctx, l.buffers.Pods)
	if err != nil {
		return err
	}
	left := map[string]bool{}
	for _, n := range plan.NoScaleUp {
		left[n.Pod.String()] = true
	}
	for _, pod := range l.buffers.Pods {
		if left[pod.Namespace+"/"+pod.Name] {
			l.bufferRoom.unplaced = append(l.bufferRoom.unplaced, pod)
		}
	}
	l.bufferRoom.inBase = true
	return nil
}

// unplacedBufferPods are the buffer pods scale-up plans for: those not
// placed in the shared simulation.
func (l *loop) unplacedBufferPods() []*v1.Pod {
	if l.bufferRoom.inBase {
		return l.bufferRoom.unplaced
	}
	if l.buffers == nil {
		return nil
	}
	return l.buffers.Pods
}

// holdBufferRoom keeps the buffers' room in a scale-down simulation: their
// pods go where they fit, first fit, after the pending pods (which take
// free room first), so a node holding a buffer's room is in use. They are
// safe to evict: a node whose buffer pods fit elsewhere may go.
func (l *loop) holdBufferRoom(ctx context.Context, sim *placement.Engine) {
	if l.bufferPodCount() == 0 || l.bufferRoom.inBase {
		return
	}
	p := l.planner(sim, l.st, nil)
	p.FirstFit = true
	if _, err := p.PlanContext(ctx, l.buffers.Pods); err != nil {
		klog.FromContext(ctx).Error(err, "Placing CapacityBuffers' pods for scale-down")
	}
}

// bufferEvents gathers, per buffer, what the scale-up made of its pods:
// a buffer gets one event, its pods none (CA's TriggeredScaleUp and
// NotTriggerScaleUp on the buffer).
type bufferEvents struct {
	l         *loop
	triggers  map[string]map[string]int // buffer -> groups text -> pods
	notTriggs map[string]map[string]int // buffer -> reason -> pods
}

func newBufferEvents(l *loop) *bufferEvents {
	return &bufferEvents{l: l, triggers: map[string]map[string]int{}, notTriggs: map[string]map[string]int{}}
}

func (e *bufferEvents) key(pod *v1.Pod) (string, bool) {
	if !cb.IsBufferPod(pod) {
		return "", false
	}
	return pod.Namespace + "/" + cb.BufferOf(pod), true
}

// triggered records a buffer pod helped by the scale-up; false for other
// pods.
func (e *bufferEvents) triggered(pod *v1.Pod, groups string) bool {
	k, ok := e.key(pod)
	if ok {
		add(e.triggers, k, groups)
	}
	return ok
}

// notTriggered records a buffer pod no scale-up helps; false for other
// pods.
func (e *bufferEvents) notTriggered(pod *v1.Pod, reason string) bool {
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

// emit sends each buffer its event.
func (e *bufferEvents) emit() {
	if e.l.buffers == nil || e.l.cfg.Recorder == nil {
		return
	}
	for k, byGroups := range e.triggers {
		b := e.l.buffers.Buffers[k]
		if b == nil {
			continue
		}
		n, texts := summary(byGroups)
		e.l.cfg.Recorder.Eventf(buffers.Ref(b), v1.EventTypeNormal, EventTriggeredScaleUp,
			"capacity buffer %d fake pods triggered scale-up: [%s]", n, texts)
	}
	for k, reasons := range e.notTriggs {
		b := e.l.buffers.Buffers[k]
		if b == nil {
			continue
		}
		n, texts := summary(reasons)
		e.l.cfg.Recorder.Eventf(buffers.Ref(b), v1.EventTypeNormal, EventNotTriggerScaleUp,
			"capacity buffer %d fake pods didn't trigger scale-up: %s", n, texts)
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
