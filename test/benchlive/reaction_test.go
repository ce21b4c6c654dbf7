//go:build benchlive

package benchlive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/test/chart"
	testkwok "draxr.dev/draxr/test/kwok"
	"draxr.dev/draxr/test/proc"
)

// BenchmarkLiveReaction: how soon a pending pod gets its node, on a fleet
// of BENCH_LIVE_NODES (5,000) nodes running 10 pods each. With CA's
// default flags (frequent loops on) and then with
// --frequent-loops-enabled=false, BENCH_LIVE_REACTION_ROUNDS (20) times
// one pod that needs a whole new 8-GPU node is created, and the time from
// the scheduler's Unschedulable condition (as a watch sees it) to the
// group's new node (IncreaseSize creates it) is measured; each round
// waits for its pod to be bound. Then, frequent loops on, 1,000 one-GPU
// pods are created over 5 s and the scale-ups (the autoscaler's
// "Scale-up: setting group size" log lines, one an IncreaseSize) counted;
// and BENCH_LIVE_REACTION_ROUNDS/2 best-effort-atomic
// ProvisioningRequests, one new node each, are timed from creation to
// Provisioned=True. BENCH_LIVE_REACTION_COMPARE=0 leaves out the run
// without frequent loops.
func BenchmarkLiveReaction(b *testing.B) {
	nodes := envInt(b, "BENCH_LIVE_NODES", 5000)
	rounds := envInt(b, "BENCH_LIVE_REACTION_ROUNDS", 20)
	for range b.N {
		reaction(b, nodes, rounds)
	}
}

func reaction(b *testing.B, nodes, rounds int) {
	const burst = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	e := start(b, ctx, nodes)
	// One group: the fleet's nodes are its members (their CPUs nearly
	// taken), the new nodes are for the GPU pods.
	g := group{name: "gpu", maxSize: nodes + 3*rounds + burst/gpusPerNode + 10, cpu: 32, devices: gpusPerNode}
	e.configure(g)
	prs := e.provisioningRequests()
	w := e.watch("gpu")
	names := e.addNodes(g, nodes)
	e.waitCount("nodes Ready", int64(nodes), time.Duration(nodes)*20*time.Millisecond+5*time.Minute, w.ready.Load)
	var running []string
	for _, n := range names {
		for i := range 10 {
			running = append(running, fmt.Sprintf("%s-%d", n, i))
		}
	}
	c := e.cluster.CP.Client
	if err := parallel(ctx, running, func(ctx context.Context, name string) error {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: v1.PodSpec{NodeName: name[:len(name)-2], TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(3)}}}}}}
		_, err := c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	e.waitCount("pods Running", int64(len(running)), time.Duration(len(running))*20*time.Millisecond+5*time.Minute, w.running.Load)

	// When a watch first saw each pod Unschedulable, and each new node.
	var mu sync.Mutex
	unschedulable := map[string]time.Time{}
	var newNodes []time.Time
	f := informers.NewSharedInformerFactory(c, 0)
	// A loaded watch may first deliver a pod already marked: adds count.
	seenPod := func(obj any) {
		p := obj.(*v1.Pod)
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Reason == v1.PodReasonUnschedulable {
				mu.Lock()
				if _, ok := unschedulable[p.Name]; !ok {
					unschedulable[p.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seenPod,
		UpdateFunc: func(_, obj any) { seenPod(obj) }}); err != nil {
		b.Fatal(err)
	}
	if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{AddFunc: func(_ any, initial bool) {
		if !initial {
			mu.Lock()
			newNodes = append(newNodes, time.Now())
			mu.Unlock()
		}
	}}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)

	gpuPod := func(name string, gpus int64, cpu int64) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: v1.PodSpec{NodeSelector: map[string]string{groupLabel: g.name}, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(cpu)},
						Limits: v1.ResourceList{gpuResource: fx.Count(gpus)}}}}}}
	}
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"frequent-loops", nil}, {"scan-interval-only", []string{"--frequent-loops-enabled=false"}}} {
		if mode.flags != nil && os.Getenv("BENCH_LIVE_REACTION_COMPARE") == "0" {
			break
		}
		as, addr, err := e.cluster.StartAutoscaler(ctx, "draxr-autoscaler-"+mode.name, append([]string{"--scale-down-enabled=false", "--enable-provisioning-requests"}, mode.flags...)...)
		if err != nil {
			b.Fatal(err)
		}
		e.waitLoops(addr, 0, 1, 5*time.Minute)
		var waits, fromCreate []time.Duration
		for i := range rounds {
			name := fmt.Sprintf("react-%s-%02d", mode.name, i)
			mu.Lock()
			nodesBefore := len(newNodes)
			mu.Unlock()
			bound := w.bound.Load()
			created := time.Now()
			if _, err := c.CoreV1().Pods(namespace).Create(ctx, gpuPod(name, gpusPerNode, 4), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			e.waitCount(name+" bound", bound+1, 2*time.Minute, w.bound.Load)
			mu.Lock()
			seen, ok := unschedulable[name]
			if !ok || len(newNodes) <= nodesBefore {
				mu.Unlock()
				b.Fatalf("%s: unschedulable seen %v, new nodes %d -> %d", name, ok, nodesBefore, len(newNodes))
			}
			waits = append(waits, newNodes[nodesBefore].Sub(seen))
			fromCreate = append(fromCreate, newNodes[nodesBefore].Sub(created))
			mu.Unlock()
		}
		fmt.Printf("bench-live reaction mode=%s nodes=%d running-pods=%d rounds=%d unschedulable->new-node %s created->new-node %s\n",
			mode.name, nodes, len(running), rounds, quantiles(waits), quantiles(fromCreate))
		if mode.flags == nil {
			requestRounds(b, e, prs, gpuPod("x", gpusPerNode, 4), max(rounds/2, 1))
			scaleUps0 := scaleUps(b, as)
			bound := w.bound.Load()
			var batch []string
			first := time.Now()
			for i := range burst {
				batch = append(batch, fmt.Sprintf("burst-%04d", i))
				if len(batch) == burst/50 {
					if err := parallel(ctx, batch, func(ctx context.Context, name string) error {
						// 3 CPUs: no room on the fleet's nodes (2 CPUs free).
						_, err := c.CoreV1().Pods(namespace).Create(ctx, gpuPod(name, 1, 3), metav1.CreateOptions{})
						return err
					}); err != nil {
						b.Fatal(err)
					}
					batch = nil
					time.Sleep(time.Until(first.Add(time.Duration(i+1) * 5 * time.Second / burst)))
				}
			}
			created := time.Since(first)
			e.waitCount("burst bound", bound+burst, 20*time.Minute, w.bound.Load)
			// How the scheduler's marks spread: a pause longer than the
			// idle window (1s) closes a batch, and so does its maximum.
			var marks []time.Time
			mu.Lock()
			for name, at := range unschedulable {
				if strings.HasPrefix(name, "burst-") {
					marks = append(marks, at)
				}
			}
			mu.Unlock()
			slices.SortFunc(marks, time.Time.Compare)
			pauses := 0
			for i := 1; i < len(marks); i++ {
				if marks[i].Sub(marks[i-1]) > time.Second {
					pauses++
				}
			}
			spread := time.Duration(0)
			if len(marks) > 0 {
				spread = marks[len(marks)-1].Sub(marks[0])
			}
			fmt.Printf("bench-live reaction burst pods=%d created-in=%.1fs marked-unschedulable=%d over %.1fs with %d pauses over 1s scale-ups=%d all-bound=%.1fs\n",
				burst, created.Seconds(), len(marks), spread.Seconds(), pauses, scaleUps(b, as)-scaleUps0, time.Since(first).Seconds())
		}
		as.Stop(10 * time.Second)
	}
}

// scaleUps counts the IncreaseSize calls the autoscaler has logged.
func scaleUps(b *testing.B, as *proc.Process) int {
	data, err := os.ReadFile(as.LogPath)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Count(data, []byte("Scale-up: setting group size"))
}

// provisioningRequests installs CA's ProvisioningRequest CRD and grants
// the autoscaler the chart's rules for --enable-provisioning-requests.
func (e *bench) provisioningRequests() prclient.Interface {
	e.b.Helper()
	cp := e.cluster.CP
	if err := cp.InstallCRDFiles(e.ctx, filepath.Join(e.cluster.Root, "charts/draxr/crds/autoscaling.x-k8s.io_provisioningrequests.yaml")); err != nil {
		e.b.Fatal(err)
	}
	if err := chart.GrantBatch(e.ctx, cp.Client, e.cluster.Root, "enable-provisioning-requests", "draxr-autoscaler-bench-batch", 3); err != nil {
		e.b.Fatal(err)
	}
	c, err := prclient.NewForConfig(cp.AdminConfig)
	if err != nil {
		e.b.Fatal(err)
	}
	return c
}

// requestRounds creates n best-effort-atomic ProvisioningRequests for one
// pod like pod each, one at a time, and reports the time from each
// creation to its Provisioned=True. Each is kept, booking its new node,
// so that the next needs a new node too.
func requestRounds(b *testing.B, e *bench, prs prclient.Interface, pod *v1.Pod, n int) {
	b.Helper()
	pt := &v1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "react-request", Namespace: namespace}, Template: v1.PodTemplateSpec{Spec: pod.Spec}}
	if _, err := e.cluster.CP.Client.CoreV1().PodTemplates(namespace).Create(e.ctx, pt, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for i := range n {
		name := fmt.Sprintf("react-request-%02d", i)
		pr := &prv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: prv1.ProvisioningRequestSpec{ProvisioningClassName: prv1.ProvisioningClassBestEffortAtomicScaleUp,
				PodSets: []prv1.PodSet{{PodTemplateRef: prv1.Reference{Name: pt.Name}, Count: 1}}}}
		created := time.Now()
		if _, err := prs.AutoscalingV1().ProvisioningRequests(namespace).Create(e.ctx, pr, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := testkwok.WaitFor(e.ctx, 2*time.Minute, 20*time.Millisecond, name+" Provisioned", func() error {
			got, err := prs.AutoscalingV1().ProvisioningRequests(namespace).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, prv1.Provisioned) {
				return fmt.Errorf("conditions %+v", got.Status.Conditions)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(created))
	}
	fmt.Printf("bench-live reaction provisioning-requests=%d class=%s created->Provisioned %s\n",
		n, prv1.ProvisioningClassBestEffortAtomicScaleUp, quantiles(took))
}

// quantiles are the median, 99th percentile and extremes of ds.
func quantiles(ds []time.Duration) string {
	ds = slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("median=%.2fs p99=%.2fs min=%.2fs max=%.2fs", ds[len(ds)/2].Seconds(),
		ds[min(len(ds)-1, len(ds)*99/100)].Seconds(), ds[0].Seconds(), ds[len(ds)-1].Seconds())
}
