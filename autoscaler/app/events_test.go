package app

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// sinkRecorder keeps what the broadcaster writes.
type sinkRecorder struct {
	mu      sync.Mutex
	written []string // reason: message, one per write
}

func (s *sinkRecorder) write(e *v1.Event) (*v1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written = append(s.written, e.Reason+": "+e.Message)
	return e, nil
}
func (s *sinkRecorder) Create(e *v1.Event) (*v1.Event, error)          { return s.write(e) }
func (s *sinkRecorder) Update(e *v1.Event) (*v1.Event, error)          { return s.write(e) }
func (s *sinkRecorder) Patch(e *v1.Event, _ []byte) (*v1.Event, error) { return s.write(e) }

func (s *sinkRecorder) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.written)
}

// As CA without --record-duplicated-events: the same event on the same
// pod, loop after loop, is written once; a new reason or message is
// written at once; with the flag every one is written.
func TestEventsWrittenOncePer5Minutes(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "giant", UID: "u1"}}
	emit := func(t *testing.T, duplicated bool) []string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b := newEventBroadcaster(ctx, duplicated)
		sink := &sinkRecorder{}
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "draxr-autoscaler"})
		for range 5 {
			r.Event(pod, v1.EventTypeNormal, "NotTriggerScaleUp", "pod didn't trigger scale-up: needs 9 GPUs")
		}
		r.Event(pod, v1.EventTypeNormal, "NotTriggerScaleUp", "pod didn't trigger scale-up: max size reached")
		r.Event(pod, v1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: [gpu 0->1]")
		want := 3
		if duplicated {
			want = 7
		}
		deadline := time.Now().Add(10 * time.Second)
		for sink.count() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // anything beyond want would show
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.written) != want {
			t.Errorf("written %d events %q, want %d", len(sink.written), sink.written, want)
		}
		return sink.written
	}
	t.Run("once", func(t *testing.T) { emit(t, false) })
	t.Run("--record-duplicated-events", func(t *testing.T) { emit(t, true) })
}
