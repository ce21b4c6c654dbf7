package estimator

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// Spread takes its shortcut only where every verdict is the node's own;
// elsewhere it schedules each pod against every node (Scored).
func TestSpreadShortcutOnlyWhereVerdictsAreTheNodes(t *testing.T) {
	spreadOver := v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}
	antiAffinity := &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}}}
	tests := []struct {
		name         string
		change       func(*v1.Pod)
		sharedPool   bool
		wantShortcut bool
	}{
		{name: "device pods", change: func(*v1.Pod) {}, wantShortcut: true},
		{name: "topology spread", change: func(p *v1.Pod) { p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spreadOver} }},
		{name: "pod anti-affinity", change: func(p *v1.Pod) { p.Spec.Affinity = antiAffinity }},
		{name: "node chosen by name", change: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelHostname: "gpu-new-0"} }},
		{name: "shared claim", change: func(p *v1.Pod) { fx.WithClaim(p, "shared", "shared-gpu") }},
		{name: "shared pool", change: func(*v1.Pod) {}, sharedPool: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newEngine(t)
			if tc.sharedPool {
				s := fx.GPUSlice("x", 2)
				s.Name, s.Spec.NodeName, s.Spec.AllNodes = "network-gpus", nil, ptr.To(true)
				s.Spec.Pool = resourceapi.ResourcePool{Name: "network", Generation: 1, ResourceSliceCount: 1}
				if err := h.Snapshot().AddResourceSlice(s); err != nil {
					t.Fatal(err)
				}
			}
			ps := pods("p", 4, 1000, fx.GPUs(fx.GPUResource, 1))
			for _, p := range ps {
				tc.change(p)
			}
			b := &BinPacking{Engine: h, Namer: func(g string, i int) string { return "gpu-new-" + string(rune('0'+i)) }}
			if got := b.NewSpread(group("gpu", 8, 8, 0), ps).local; got != tc.wantShortcut {
				t.Fatalf("shortcut %v, want %v", got, tc.wantShortcut)
			}
		})
	}
}
