//go:build benchlive

package benchlive

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/test/auditlog"
	testkwok "draxr.dev/draxr/test/kwok"
)

// gpusPerNode is the DRA group's devices a node; a pod asks one.
const gpusPerNode = 8

func onePodGPU(name string, claim bool) (*v1.Pod, *resourceapi.ResourceClaim) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "train"}},
		Spec: v1.PodSpec{
			NodeSelector:                  map[string]string{groupLabel: "gpu"},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(1)}}}},
		}}
	if !claim {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpuResource: fx.Count(1)}
		return p, nil
	}
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"}}}}}}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p, c
}

// BenchmarkLiveScaleUp: 8 one-GPU pods a node for BENCH_LIVE_NODES
// (5,000) nodes from an empty DRA group, pods asking the GPU as a
// DRA-backed extended resource or through their own ResourceClaim.
func BenchmarkLiveScaleUp(b *testing.B) {
	nodes := envInt(b, "BENCH_LIVE_NODES", 5000)
	for _, shape := range []string{"extended", "claim"} {
		b.Run(shape, func(b *testing.B) {
			for range b.N {
				scaleUp(b, nodes, shape == "claim")
			}
		})
	}
}

func scaleUp(b *testing.B, nodes int, claims bool) {
	pods := nodes * gpusPerNode
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	e := start(b, ctx, nodes)
	e.configure(group{name: "gpu", maxSize: nodes + nodes/10 + 1, cpu: 32, devices: gpusPerNode})
	w := e.watch("gpu")
	// CA's flags at their defaults (10 s loops, 5-QPS client), scale-down off.
	as, addr, err := e.cluster.StartAutoscaler(ctx, "draxr-autoscaler-bench", "--scale-down-enabled=false", "--profiling")
	if err != nil {
		b.Fatal(err)
	}
	e.waitLoops(addr, 0, 1, 2*time.Minute)
	offset := e.auditSize()
	loops0, _ := loops(b, addr)
	cpu0, _ := usage(as.PID())

	names := make([]string, pods)
	for i := range names {
		names[i] = fmt.Sprintf("train-%06d", i)
	}
	first := time.Now()
	c := e.cluster.CP.Client
	if err := parallel(ctx, names, func(ctx context.Context, name string) error {
		p, claim := onePodGPU(name, claims)
		if claim != nil {
			if _, err := c.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		_, err := c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	created := time.Since(first)
	timeout := time.Duration(pods)*50*time.Millisecond + 10*time.Minute
	e.waitCount("pods bound", int64(pods), timeout, w.bound.Load)
	e.waitCount("nodes Ready", w.nodes.Load(), timeout, w.ready.Load)
	allReady := time.Since(first)
	lastBound := time.Duration(w.lastBound.Load() - first.UnixNano())
	toIncrease := time.Duration(w.firstNode.Load() - first.UnixNano())
	loops1, _ := loops(b, addr)
	byVerb := e.auditCounts(offset).ByVerb
	cpu1, rss := usage(as.PID())
	n := loops1 - loops0
	shape := "extended"
	if claims {
		shape = "claim"
	}
	fmt.Printf("bench-live scale-up shape=%s nodes=%d pods=%d pods-created-in=%.1fs first-pending->IncreaseSize=%.1fs ->all-nodes-Ready=%.1fs ->last-pod-bound=%.1fs loops=%.0f requests/loop %s autoscaler-cpu=%.1fs peak-rss=%.0fMiB\n",
		shape, w.nodes.Load(), pods, created.Seconds(), toIncrease.Seconds(), allReady.Seconds(), lastBound.Seconds(), n, auditlog.PerLoop(byVerb, n),
		(cpu1 - cpu0).Seconds(), rss)
}

// BenchmarkLiveSteady: BENCH_LIVE_NODES (5,000) nodes running 10 pods
// each, every node 94% used: a loop has nothing to do. Measured with CA's
// default --frequent-loops-enabled=true and then with it false.
func BenchmarkLiveSteady(b *testing.B) {
	nodes := envInt(b, "BENCH_LIVE_NODES", 5000)
	for range b.N {
		steady(b, nodes)
	}
}

func steady(b *testing.B, nodes int) {
	const podsPerNode, measured = 10, 5
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	e := start(b, ctx, nodes)
	g := group{name: "cpu", maxSize: nodes + 10, cpu: 32}
	e.configure(g)
	w := e.watch("cpu")
	names := e.addNodes(g, nodes)
	e.waitCount("nodes Ready", int64(nodes), time.Duration(nodes)*20*time.Millisecond+5*time.Minute, w.ready.Load)
	var pods []string
	for _, n := range names {
		for i := range podsPerNode {
			pods = append(pods, fmt.Sprintf("%s-%d", n, i))
		}
	}
	c := e.cluster.CP.Client
	if err := parallel(ctx, pods, func(ctx context.Context, name string) error {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: v1.PodSpec{NodeName: name[:len(name)-2], TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(3)}}}}}}
		_, err := c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	e.waitCount("pods Running", int64(len(pods)), time.Duration(len(pods))*20*time.Millisecond+5*time.Minute, w.running.Load)
	// CA's defaults (frequent loops on), then the 10 s scan alone: on a
	// quiet cluster no event starts a loop, so the two should cost alike.
	for _, mode := range []struct{ name, flag string }{{"frequent-loops", "--frequent-loops-enabled=true"}, {"scan-interval-only", "--frequent-loops-enabled=false"}} {
		as, addr, err := e.cluster.StartAutoscaler(ctx, "draxr-autoscaler-steady-"+mode.name, "--profiling", mode.flag)
		if err != nil {
			b.Fatal(err)
		}
		// The first loops fill caches and write the status; then measure.
		e.waitLoops(addr, 0, 3, 10*time.Minute)
		offset := e.auditSize()
		count0, sec0 := loops(b, addr)
		cpu0, _ := usage(as.PID())
		count1, sec1 := e.waitLoops(addr, count0, measured, 10*time.Minute)
		byResource := e.auditCounts(offset).ByResource
		cpu1, rss := usage(as.PID())
		n := count1 - count0
		fmt.Printf("bench-live steady mode=%s nodes=%d pods=%d loops=%.0f loop-wall=%.3fs requests/loop %s autoscaler-cpu-per-loop-interval=%.3fs peak-rss=%.0fMiB\n",
			mode.name, nodes, len(pods), n, (sec1-sec0)/n, auditlog.PerLoop(byResource, n), (cpu1-cpu0).Seconds()/n, rss)
		as.Stop(10 * time.Second)
	}
}

// BenchmarkLiveScaleDown: BENCH_LIVE_SCALEDOWN_NODES (2,000) DRA nodes,
// each running one evictable ReplicaSet pod (1 CPU), the group's min 40%
// of them: 60% are drained and removed. CA's parallelism defaults
// (--max-scale-down-parallelism=10, --max-drain-parallelism=1), then
// raised to 100 and 100. With one drain at a time a removal takes a loop,
// so at CA's defaults 1,200 removals take 1,200 loops (over three hours
// of 10 s loops); BENCH_LIVE_SCALEDOWN_MINUTES, when set, ends a run
// there and reports the removals so far and their rate.
func BenchmarkLiveScaleDown(b *testing.B) {
	nodes := envInt(b, "BENCH_LIVE_SCALEDOWN_NODES", 2000)
	budget := time.Duration(envInt(b, "BENCH_LIVE_SCALEDOWN_MINUTES", 600)) * time.Minute
	for _, par := range []struct {
		name           string
		removal, drain int
	}{{"ca-defaults", 10, 1}, {"raised", 100, 100}} {
		b.Run(par.name, func(b *testing.B) {
			for range b.N {
				scaleDown(b, nodes, par.removal, par.drain, budget)
			}
		})
	}
}

func scaleDown(b *testing.B, nodes, removal, drain int, budget time.Duration) {
	keep := nodes * 4 / 10
	// A removal a 10 s loop at worst (one drain at a time), with margin.
	timeout := min(budget, time.Duration(nodes-keep)*15*time.Second+10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Hour)
	defer cancel()
	e := start(b, ctx, nodes)
	g := group{name: "gpu", minSize: keep, maxSize: nodes, cpu: 32, devices: gpusPerNode}
	e.configure(g)
	w := e.watch("gpu")
	names := e.addNodes(g, nodes)
	e.waitCount("nodes Ready", int64(nodes), time.Duration(nodes)*20*time.Millisecond+5*time.Minute, w.ready.Load)
	c := e.cluster.CP.Client
	labels := map[string]string{"app": "movers"}
	spec := v1.PodSpec{NodeSelector: map[string]string{groupLabel: "gpu"}, TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(1)}}}}}
	// One pod a node, bound where it stands; the ReplicaSet made after
	// adopts them, so a drained pod comes back and is scheduled elsewhere.
	if err := parallel(ctx, names, func(ctx context.Context, node string) error {
		s := spec.DeepCopy()
		s.NodeName = node
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mover-" + node, Namespace: namespace, Labels: labels}, Spec: *s}
		_, err := c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	e.waitCount("pods Running", int64(nodes), time.Duration(nodes)*20*time.Millisecond+5*time.Minute, w.running.Load)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "movers", Namespace: namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(nodes)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	if _, err := c.AppsV1().ReplicaSets(namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := wait(ctx, 10*time.Minute, "ReplicaSet adopts the pods", func() error {
		pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		owned := 0
		for _, p := range pods.Items {
			if metav1.GetControllerOf(&p) != nil {
				owned++
			}
		}
		if owned != nodes || len(pods.Items) != nodes {
			return fmt.Errorf("%d of %d pods owned", owned, len(pods.Items))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	as, addr, err := e.cluster.StartAutoscaler(ctx, "draxr-autoscaler-bench",
		"--scale-down-unneeded-time=30s", "--scale-down-delay-after-add=0s",
		fmt.Sprintf("--max-scale-down-parallelism=%d", removal), fmt.Sprintf("--max-drain-parallelism=%d", drain))
	if err != nil {
		b.Fatal(err)
	}
	var firstRemoval, lastRemoval time.Duration
	left := nodes
	stopped := false
	if err := wait(ctx, timeout, "group down to its min", func() error {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: groupLabel + "=gpu"})
		if err != nil {
			return err
		}
		if len(list.Items) < left {
			left, lastRemoval = len(list.Items), time.Since(start)
			if firstRemoval == 0 {
				firstRemoval = lastRemoval
			}
		}
		if len(list.Items) > keep {
			if time.Since(start) > budget-2*time.Second {
				stopped = true
				return nil
			}
			return fmt.Errorf("%d nodes", len(list.Items))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	n, _ := loops(b, addr)
	cpu, rss := usage(as.PID())
	removed := nodes - left
	if removed == 0 {
		b.Fatalf("no node removed within %s", budget)
	}
	outcome := fmt.Sprintf("removed=%d start->first-removal=%.1fs start->last-removal=%.1fs", removed, firstRemoval.Seconds(), lastRemoval.Seconds())
	if stopped {
		// The rate after the first removal, which waits the unneeded time.
		rate := float64(removed-1) / (lastRemoval - firstRemoval).Minutes()
		outcome = fmt.Sprintf("removed=%d-of-%d(stopped-at-BENCH_LIVE_SCALEDOWN_MINUTES) start->first-removal=%.1fs start->last-so-far=%.1fs removals/min=%.1f",
			removed, nodes-keep, firstRemoval.Seconds(), lastRemoval.Seconds(), rate)
	}
	fmt.Printf("bench-live scale-down nodes=%d max-scale-down-parallelism=%d max-drain-parallelism=%d unneeded-time=30s %s loops=%.0f autoscaler-cpu=%.1fs peak-rss=%.0fMiB\n",
		nodes, removal, drain, outcome, n, cpu.Seconds(), rss)
}

func wait(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	last := time.Now()
	return testkwok.WaitFor(ctx, timeout, time.Second, what, func() error {
		err := cond()
		if err != nil && time.Since(last) > time.Minute {
			fmt.Printf("  %s: %v\n", what, err)
			last = time.Now()
		}
		return err
	})
}
