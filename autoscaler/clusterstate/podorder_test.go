package clusterstate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// Loop after loop, with pods replaced, added, removed and one even
// renamed in place, podOrder sorts as a full sort does.
func TestPodOrderSortsAsAFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 57))
	var live []*v1.Pod
	for i := range 300 {
		live = append(live, fx.Pod(fmt.Sprintf("p-%03d", rng.IntN(1000)*1000+i), 100, nil))
	}
	var o podOrder
	for loop := range 30 {
		switch loop % 5 {
		case 1: // a pod replaced by a changed copy, as the informer does
			i := rng.IntN(len(live))
			changed := live[i].DeepCopy()
			changed.Name = fmt.Sprintf("q-%d", loop)
			live[i] = changed
		case 2: // pods added and removed
			live = append(live[:3], live[10:]...)
			live = append(live, fx.Pod(fmt.Sprintf("a-%d", loop), 100, nil), fx.Pod(fmt.Sprintf("z-%d", loop), 100, nil))
		case 3: // a pod edited in place: never done by an informer, still sorted
			live[rng.IntN(len(live))].Namespace = fmt.Sprintf("ns-%d", loop)
		}
		pods := slices.Clone(live)
		rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		want := slices.Clone(pods)
		slices.SortFunc(want, comparePods)
		o.sort(pods)
		if !slices.Equal(pods, want) {
			t.Fatalf("loop %d: podOrder's order differs from a full sort", loop)
		}
	}
}

// A pod updated between two loops is the updated one in the next loop's
// state, not the one the reused order remembers.
func TestChangedPodSeenNextLoop(t *testing.T) {
	waiting := pending("waiting", false, false)
	ctx, client, l := informerView(t, fx.Node("n", 8, 32, nil), waiting, fx.Pod("other", 100, nil))
	r := NewRegistry(RegistryConfig{})
	provider := fakeProvider{}
	st, err := readState(r, l, provider)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unschedulable) != 0 {
		t.Fatalf("unschedulable = %v before the scheduler tried the pod", st.Unschedulable)
	}
	marked := pending("waiting", true, false)
	marked.ResourceVersion = "2"
	if _, err := client.CoreV1().Pods(marked.Namespace).Update(ctx, marked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the marked pod", func() bool {
		p, err := l.Pods.Pods(marked.Namespace).Get(marked.Name)
		return err == nil && len(p.Status.Conditions) > 0
	})
	st, err = readState(r, l, provider)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unschedulable) != 1 || len(st.Unschedulable[0].Status.Conditions) == 0 {
		t.Fatalf("unschedulable = %v after the scheduler marked the pod, want it", st.Unschedulable)
	}
	all, _ := l.Pods.List(labels.Everything())
	if len(st.AllPods) != len(all) || !slices.IsSortedFunc(st.AllPods, comparePods) {
		t.Fatalf("all pods = %d, sorted %v; want the %d pods, sorted", len(st.AllPods), slices.IsSortedFunc(st.AllPods, comparePods), len(all))
	}
}
