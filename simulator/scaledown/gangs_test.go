package scaledown

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/gang"
)

// A running gang keeps the nodes without which fewer than its minCount
// pods would stay scheduled; pods of a gang with room to spare still move.
func TestRunningGangKeepsItsNodes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		minCount    int32
		topology    bool
		wantRemoved int
		wantKept    int
	}{
		// 6 light nodes run 2 gang pods each: 12 scheduled.
		{name: "every pod needed", minCount: 12, wantRemoved: 0, wantKept: 6},
		{name: "room for two nodes to go", minCount: 8, wantRemoved: 2, wantKept: 4},
		{name: "no gang policy", minCount: 0, wantRemoved: 6},
		// Moved pods could land in another rack: every node is kept.
		{name: "topology gang with room to spare", minCount: 8, topology: true, wantRemoved: 0, wantKept: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*v1.Pod
			h := spreadClusterWith(t, 4, 4, 6, 2, nil, func(pod *v1.Pod, node string) {
				if strings.HasPrefix(node, "light") {
					pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
					placed := pod.DeepCopy()
					placed.Spec.NodeName = node
					pods = append(pods, placed)
				}
			})
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: pods[0].Namespace}}
			if tc.minCount > 0 {
				pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: tc.minCount}
			}
			want, wantText := GangBelowMinCount, "PodGroup "+pg.Namespace+"/train, a gang of minCount"
			if tc.topology {
				pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
					Topology: []schedulingv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}
				want, wantText = TopologyGangNode, "PodGroup "+pg.Namespace+"/train, which must run in one domain of example.com/rack"
			}
			gangs := gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{pg}}, pods)
			removals, rejections := Find(h, Options{UtilizationThreshold: 0.5, Gangs: gangs})
			if len(removals) != tc.wantRemoved {
				t.Fatalf("%d removable (%v), want %d; rejections %v", len(removals), removals, tc.wantRemoved, rejections)
			}
			kept := 0
			for _, r := range rejections {
				if r.Code != want {
					continue
				}
				kept++
				if !strings.Contains(r.Reason, wantText) {
					t.Errorf("node %s: reason %q does not name the gang", r.Node, r.Reason)
				}
			}
			if kept != tc.wantKept {
				t.Errorf("%d nodes kept for the gang, want %d: %v", kept, tc.wantKept, rejections)
			}
		})
	}
}
