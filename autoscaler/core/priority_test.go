package core

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/simulator/expander"
)

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The priority expander reads CA's ConfigMap at every choice: the highest
// priority whose regexp matches anywhere in a group's name wins, an edit
// applies at once, and each problem is a Warning event on the ConfigMap
// with CA's reason.
func TestPriorityConfigMapChoosesGroupAndRecordsEvents(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	recorder := record.NewFakeRecorder(100)
	p := &PriorityConfigMap{Lister: corelisters.NewConfigMapLister(indexer).ConfigMaps("kube-system"), Recorder: recorder, Logger: klog.Background()}
	options := []expander.Option{
		{Group: "cpu", NewNodes: 1, PodCount: 4, Waste: 0.1},
		{Group: "gpu-a100", NewNodes: 1, PodCount: 4, Waste: 0.5},
		{Group: "gpu-t4", NewNodes: 2, PodCount: 4, Waste: 0.3},
	}
	set := func(data map[string]string) {
		if err := indexer.Add(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PriorityConfigMapName, Namespace: "kube-system"}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"priority", "priority,least-waste"} {
		t.Run(name, func(t *testing.T) {
			exp, err := expander.NewWithPriority(name, p.Filter, 1)
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name   string
				data   map[string]string // nil: no ConfigMap
				want   string            // "" : no group chosen
				events []string
			}{
				{name: "no ConfigMap", data: nil},
				{name: "a100 first", data: map[string]string{"priorities": "10:\n  - gpu\n50:\n  - a100$\n"}, want: "gpu-a100",
					events: []string{"Warning PriorityConfigMapNotMatchedGroup priority expander: node group cpu matches no regexp of ConfigMap kube-system/cluster-autoscaler-priority-expander"}},
				{name: "edited: t4 first", data: map[string]string{"priorities": "10:\n  - .*\n50:\n  - t4\n"}, want: "gpu-t4"},
				{name: "no key", data: map[string]string{"other": "x"},
					events: []string{`Warning PriorityConfigMapInvalid priority expander: ConfigMap kube-system/cluster-autoscaler-priority-expander has no "priorities" key`}},
				{name: "bad regexp", data: map[string]string{"priorities": "10:\n  - gpu(\n"},
					events: []string{`Warning PriorityConfigMapInvalid priority expander: ConfigMap kube-system/cluster-autoscaler-priority-expander key "priorities": expander priorities: 10[0]: error parsing regexp`}},
				{name: "not YAML priorities", data: map[string]string{"priorities": "high: [gpu]\n"},
					events: []string{`Warning PriorityConfigMapInvalid priority expander: ConfigMap kube-system/cluster-autoscaler-priority-expander key "priorities": expander priorities: key "high": must be an integer priority`}},
				{name: "no group matches: all considered", data: map[string]string{"priorities": "10:\n  - tpu\n"}, want: "cpu",
					events: []string{"Warning PriorityConfigMapNoGroupMatched priority expander: no node group that could help matches ConfigMap kube-system/cluster-autoscaler-priority-expander; all are considered"}},
			}
			for _, s := range steps {
				if s.data == nil {
					_ = indexer.Delete(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PriorityConfigMapName, Namespace: "kube-system"}})
				} else {
					set(s.data)
				}
				drainEvents(recorder)
				got := exp.Best(options)
				if got.Group != s.want {
					t.Errorf("%s: chose %q, want %q", s.name, got.Group, s.want)
				}
				events := drainEvents(recorder)
				for _, want := range s.events {
					found := false
					for _, e := range events {
						found = found || strings.HasPrefix(e, want)
					}
					if !found {
						t.Errorf("%s: events %q lack %q", s.name, events, want)
					}
				}
				if len(s.events) == 0 && s.want != "" && len(events) > 0 && !strings.Contains(events[0], "NotMatchedGroup") {
					t.Errorf("%s: unexpected events %q", s.name, events)
				}
			}
		})
	}
}

// --new-pod-scale-up-delay and the pod annotation: pods younger than
// their delay wait; a bad or lower annotation leaves the flag's delay.
func TestOldEnoughDelaysYoungPods(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name string, age time.Duration, annotation string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if annotation != "" {
			p.Annotations = map[string]string{PodScaleUpDelayAnnotation: annotation}
		}
		return p
	}
	pods := []*v1.Pod{
		pod("old", 2*time.Minute, ""),
		pod("young", 10*time.Second, ""),
		pod("annotated-5m", 2*time.Minute, "5m"),
		pod("annotated-30s", 2*time.Minute, "30s"), // below a 1m flag: the flag applies
		pod("annotated-bad", 2*time.Minute, "soon"),
	}
	for _, tc := range []struct {
		delay time.Duration
		want  string
	}{
		{0, "old young annotated-30s annotated-bad"},
		{time.Minute, "old annotated-30s annotated-bad"},
		{3 * time.Minute, ""},
	} {
		var got []string
		for _, p := range oldEnough(t.Context(), pods, tc.delay, now) {
			got = append(got, p.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("--new-pod-scale-up-delay=%s: pods considered %q, want %q", tc.delay, strings.Join(got, " "), tc.want)
		}
	}
}
