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

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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
// waits for its pod to be bound. Then, frequent loops on,
// BENCH_LIVE_REACTION_ROUNDS/2 best-effort-atomic ProvisioningRequests,
// one new node each, are timed from creation to Provisioned=True; and
// 1,000 one-GPU pods are created over 5 s and the scale-ups (the
// autoscaler's "Scale-up: setting group size" log lines, one an
// IncreaseSize) counted. BENCH_LIVE_REACTION_COMPARE=0 leaves out the run
// without frequent loops.
//
// BENCH_LIVE_CA_BINARY, a cluster-autoscaler built from CA's source, adds
// CA on the same path: rounds of a CPU-only pod that needs a new node of
// a CPU group (CA does not count DRA devices), run by draxr and then by
// CA (--cloud-provider=kwok, the same ConfigMaps, CA's default flags).
func BenchmarkLiveReaction(b *testing.B) {
	nodes := envInt(b, "BENCH_LIVE_NODES", 5000)
	rounds := envInt(b, "BENCH_LIVE_REACTION_ROUNDS", 20)
	for range b.N {
		reaction(b, nodes, rounds)
	}
}

const (
	burst      = 1000
	cpuGroup   = "cpu"
	reactGroup = "gpu"
)

func reaction(b *testing.B, nodes, rounds int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	e := start(b, ctx, nodes)
	caBinary := os.Getenv("BENCH_LIVE_CA_BINARY")
	// The fleet's nodes are the GPU group's members (their CPUs nearly
	// taken), the new nodes are for the GPU pods; the CPU group's, for
	// the pods both autoscalers can plan.
	g := group{name: reactGroup, maxSize: nodes + 3*rounds + burst/gpusPerNode + 10, cpu: 32, devices: gpusPerNode}
	e.configure(g, group{name: cpuGroup, maxSize: 3*rounds + 5, cpu: 32})
	prs := e.provisioningRequests()
	w := e.watch(reactGroup)
	names := e.addNodes(g, nodes)
	e.waitCount("nodes Ready", int64(nodes), time.Duration(nodes)*20*time.Millisecond+5*time.Minute, w.ready.Load)
	e.fillFleet(names, w)
	m := e.watchMarks()
	// Whoever shares the machine can tell when the timed part begins.
	fmt.Printf("bench-live progress: %d nodes and their pods ready, timing starts\n", nodes)
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
		m.rounds(b, e, w, "draxr "+mode.name, "react-"+mode.name, rounds, func(name string) *v1.Pod { return gpuPod(name, reactGroup, gpusPerNode, 4) })
		if mode.flags == nil {
			requests := max(rounds/2, 1)
			requestRounds(b, e, prs, gpuPod("x", reactGroup, gpusPerNode, 4), requests)
			m.burst(b, e, w, as, requests)
			if caBinary != "" {
				m.rounds(b, e, w, "draxr frequent-loops, a CPU pod", "cpu-draxr", rounds, func(name string) *v1.Pod { return cpuPod(name) })
			}
		}
		as.Stop(10 * time.Second)
	}
	if caBinary != "" {
		ca := e.startCA(caBinary)
		m.rounds(b, e, w, "CA (its defaults), a CPU pod", "cpu-ca", rounds, func(name string) *v1.Pod { return cpuPod(name) })
		ca.Stop(10 * time.Second)
	}
}

// fillFleet runs 10 pods of 3 CPUs on each of the fleet's nodes.
func (e *bench) fillFleet(names []string, w *watcher) {
	e.b.Helper()
	var running []string
	for _, n := range names {
		for i := range 10 {
			running = append(running, fmt.Sprintf("%s-%d", n, i))
		}
	}
	c := e.cluster.CP.Client
	if err := parallel(e.ctx, running, func(ctx context.Context, name string) error {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: v1.PodSpec{NodeName: name[:len(name)-2], TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(3)}}}}}}
		_, err := c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		e.b.Fatal(err)
	}
	e.waitCount("pods Running", int64(len(running)), time.Duration(len(running))*20*time.Millisecond+5*time.Minute, w.running.Load)
}

func gpuPod(name, group string, gpus, cpu int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{NodeSelector: map[string]string{groupLabel: group}, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(cpu)},
					Limits: v1.ResourceList{gpuResource: fx.Count(gpus)}}}}}}
}

// cpuPod takes 20 of a CPU node's 32 CPUs: each needs a node of its own.
func cpuPod(name string) *v1.Pod {
	p := gpuPod(name, cpuGroup, 0, 20)
	p.Spec.Containers[0].Resources.Limits = nil
	return p
}

// marks records when a watch first saw each pod Unschedulable, and when
// each new node appeared.
type marks struct {
	c             kubernetes.Interface
	mu            sync.Mutex
	unschedulable map[string]time.Time
	newNodes      []time.Time
}

func (e *bench) watchMarks() *marks {
	e.b.Helper()
	m := &marks{c: e.cluster.CP.Client, unschedulable: map[string]time.Time{}}
	f := informers.NewSharedInformerFactory(m.c, 0)
	// A loaded watch may first deliver a pod already marked: adds count.
	seenPod := func(obj any) {
		p := obj.(*v1.Pod)
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Reason == v1.PodReasonUnschedulable {
				m.mu.Lock()
				if _, ok := m.unschedulable[p.Name]; !ok {
					m.unschedulable[p.Name] = time.Now()
				}
				m.mu.Unlock()
			}
		}
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seenPod,
		UpdateFunc: func(_, obj any) { seenPod(obj) }}); err != nil {
		e.b.Fatal(err)
	}
	if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{AddFunc: func(_ any, initial bool) {
		if !initial {
			m.mu.Lock()
			m.newNodes = append(m.newNodes, time.Now())
			m.mu.Unlock()
		}
	}}); err != nil {
		e.b.Fatal(err)
	}
	stop := make(chan struct{})
	e.b.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return m
}

// rounds creates n pods one at a time, each waiting for its pod to be
// bound, and reports the time from its Unschedulable mark, and from its
// creation, to the next new node.
func (m *marks) rounds(b *testing.B, e *bench, w *watcher, who, prefix string, n int, pod func(name string) *v1.Pod) {
	b.Helper()
	var waits, fromCreate []time.Duration
	for i := range n {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		m.mu.Lock()
		nodesBefore := len(m.newNodes)
		m.mu.Unlock()
		bound := w.bound.Load()
		created := time.Now()
		if _, err := m.c.CoreV1().Pods(namespace).Create(e.ctx, pod(name), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		e.waitCount(name+" bound", bound+1, 2*time.Minute, w.bound.Load)
		m.mu.Lock()
		seen, ok := m.unschedulable[name]
		if !ok || len(m.newNodes) <= nodesBefore {
			m.mu.Unlock()
			b.Fatalf("%s: unschedulable seen %v, new nodes %d -> %d", name, ok, nodesBefore, len(m.newNodes))
		}
		waits = append(waits, m.newNodes[nodesBefore].Sub(seen))
		fromCreate = append(fromCreate, m.newNodes[nodesBefore].Sub(created))
		m.mu.Unlock()
	}
	fmt.Printf("bench-live reaction autoscaler=%q nodes=%d rounds=%d unschedulable->new-node %s created->new-node %s\n",
		who, e.fleet, n, quantiles(waits), quantiles(fromCreate))
}

// burst creates 1,000 one-GPU pods of one Job over 5 s and counts the
// scale-ups. The Job names another controller (spec.managedBy, as
// Kueue's MultiKueue does) which creates its pods: the benchmark, at the
// pace it sets (kube-controller-manager's 20-QPS client would take 50 s).
// freeNodes are the group's empty nodes (the ended requests'): the
// scheduler puts pods there, the rest need new nodes.
func (m *marks) burst(b *testing.B, e *bench, w *watcher, as *proc.Process, freeNodes int) {
	b.Helper()
	needed := burst/gpusPerNode - freeNodes
	job := burstJob(b, e, m.c)
	scaleUps0 := scaleUps(b, as)
	bound, nodes0 := w.bound.Load(), w.nodes.Load()
	var batch []string
	first := time.Now()
	for i := range burst {
		batch = append(batch, fmt.Sprintf("burst-%04d", i))
		if len(batch) == burst/50 {
			if err := parallel(e.ctx, batch, func(ctx context.Context, name string) error {
				// 3 CPUs: no room on the fleet's nodes (2 CPUs free).
				pod := gpuPod(name, reactGroup, 1, 3)
				pod.Labels, pod.Spec.RestartPolicy = job.Spec.Template.Labels, job.Spec.Template.Spec.RestartPolicy
				pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
				_, err := m.c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
				return err
			}); err != nil {
				b.Fatal(err)
			}
			batch = nil
			time.Sleep(time.Until(first.Add(time.Duration(i+1) * 5 * time.Second / burst)))
		}
	}
	created := time.Since(first)
	// What is measured is how many scale-ups asked for the burst's nodes;
	// a superfluous one after them would come within the next loops.
	e.waitCount("burst nodes", nodes0+int64(needed), 10*time.Minute, w.nodes.Load)
	nodesAt := time.Since(first)
	time.Sleep(time.Minute)
	fmt.Printf("bench-live reaction burst pods=%d created-in=%.1fs scale-ups=%d new-nodes=%d (needed %d) all-created=%.1fs\n",
		burst, created.Seconds(), scaleUps(b, as)-scaleUps0, w.nodes.Load()-nodes0, needed, nodesAt.Seconds())
	// The scheduler's binding of 1,000 pods is reported, not required: at
	// 5,000 nodes it takes this scheduler longer than the autoscaler.
	allBound := "no (20m)"
	if err := testkwok.WaitFor(e.ctx, 20*time.Minute, time.Second, "burst bound", func() error {
		if n := w.bound.Load(); n < bound+burst {
			return fmt.Errorf("%d of %d", n-bound, burst)
		}
		return nil
	}); err == nil {
		allBound = fmt.Sprintf("%.1fs", time.Since(first).Seconds())
	}
	// How the scheduler's marks spread: a pause longer than the idle
	// window (1s) closes a batch, and so does its maximum.
	var marked []time.Time
	m.mu.Lock()
	for name, at := range m.unschedulable {
		if strings.HasPrefix(name, "burst-") {
			marked = append(marked, at)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(marked, time.Time.Compare)
	pauses := 0
	for i := 1; i < len(marked); i++ {
		if marked[i].Sub(marked[i-1]) > time.Second {
			pauses++
		}
	}
	spread := time.Duration(0)
	if len(marked) > 0 {
		spread = marked[len(marked)-1].Sub(marked[0])
	}
	fmt.Printf("bench-live reaction burst marked-unschedulable=%d over %.1fs with %d pauses over 1s scale-ups=%d all-bound=%s\n",
		len(marked), spread.Seconds(), pauses, scaleUps(b, as)-scaleUps0, allBound)
}

// burstJob is the burst's Job, managed by the benchmark.
func burstJob(b *testing.B, e *bench, c kubernetes.Interface) *batchv1.Job {
	b.Helper()
	labels := map[string]string{"app": "burst"}
	pod := gpuPod("x", reactGroup, 1, 3)
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: namespace},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](burst), Completions: ptr.To[int32](burst),
			ManagedBy: ptr.To("bench.draxr.dev/burst"), Selector: &metav1.LabelSelector{MatchLabels: labels},
			ManualSelector: ptr.To(true),
			Template:       v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}}}
	job, err := c.BatchV1().Jobs(namespace).Create(e.ctx, job, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return job
}

// scaleUps counts the IncreaseSize calls the autoscaler has logged.
func scaleUps(b *testing.B, as *proc.Process) int {
	data, err := os.ReadFile(as.LogPath)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Count(data, []byte("Scale-up: setting group size"))
}

// startCA starts CA's own binary on the kwok ConfigMaps, as the cluster's
// admin (CA's RBAC is not draxr's), with CA's default flags but for
// scale-down, off as for draxr.
func (e *bench) startCA(binary string) *proc.Process {
	e.b.Helper()
	e.b.Setenv("POD_NAMESPACE", "kube-system")
	// Outside a cluster CA's kwok provider reads $KUBECONFIG.
	e.b.Setenv("KWOK_PROVIDER_MODE", "local")
	e.b.Setenv("KUBECONFIG", e.cluster.CP.AdminKubeconfig)
	p, err := e.cluster.CP.StartProcess("cluster-autoscaler", binary, "--kubeconfig="+e.cluster.CP.AdminKubeconfig,
		"--cloud-provider=kwok", "--namespace=kube-system", "--scale-down-enabled=false", "--leader-elect=false", "--v=2")
	if err != nil {
		e.b.Fatal(err)
	}
	e.b.Cleanup(func() {
		// Kept for reading why CA's loops started when they did.
		log := filepath.Join(e.cluster.Root, "bin", "bench-live-cluster-autoscaler.log")
		if err := os.WriteFile(log, []byte(p.LogTail(64<<20)), 0o644); err != nil {
			e.b.Log(err)
		}
		if e.b.Failed() {
			e.b.Logf("cluster-autoscaler log (tail):\n%s", p.LogTail(20000))
		}
	})
	return p
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
// creation to its Provisioned=True. Each is kept while the rounds run,
// booking its new node, so that the next needs a new node too; then they
// are deleted, as Kueue deletes a finished workload's: their bookings end
// and their n nodes are empty. (Kept, a booking displaced by the next
// pods' scheduling takes room of the nodes they scale up, as in CA, and
// asks for more.)
func requestRounds(b *testing.B, e *bench, prs prclient.Interface, pod *v1.Pod, n int) {
	b.Helper()
	pt := &v1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "react-request", Namespace: namespace}, Template: v1.PodTemplateSpec{Spec: pod.Spec}}
	if _, err := e.cluster.CP.Client.CoreV1().PodTemplates(namespace).Create(e.ctx, pt, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	var names []string
	for i := range n {
		name := fmt.Sprintf("react-request-%02d", i)
		names = append(names, name)
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
	for _, name := range names {
		if err := prs.AutoscalingV1().ProvisioningRequests(namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// quantiles are the median, 99th percentile and extremes of ds.
func quantiles(ds []time.Duration) string {
	ds = slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("median=%.2fs p99=%.2fs min=%.2fs max=%.2fs", ds[len(ds)/2].Seconds(),
		ds[min(len(ds)-1, len(ds)*99/100)].Seconds(), ds[0].Seconds(), ds[len(ds)-1].Seconds())
}
