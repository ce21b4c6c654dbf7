//go:build benchlive

package benchlive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/cloudprovider/kwok"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/auditlog"
	testkwok "draxr.dev/draxr/test/kwok"
)

const (
	groupLabel  = "node.kubernetes.io/instance-type"
	driver      = "gpu.example.com"
	gpuResource = "example.com/gpu"
	namespace   = "bench"
)

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// bench is one benchmark's cluster, with the API server's audit log of
// the autoscaler's requests.
type bench struct {
	b       *testing.B
	ctx     context.Context
	cluster *testkwok.Cluster
	audit   string
	fleet   int // the nodes start was asked for
}

// heartbeatLease keeps the fake kubelets' Lease writes near 100 a
// second whatever the fleet, so heartbeats do not starve the rest on a
// small machine: kwokctl's 40 s lease (renewed every 10 s, as a kubelet)
// up to 1,000 nodes, proportionally longer beyond (200 s, renewed every
// 50 s, at 5,000).
func heartbeatLease(nodes int) time.Duration {
	return max(40*time.Second, time.Duration(nodes)*40*time.Millisecond)
}

// start brings up the cluster for a fleet of up to nodes nodes.
func start(b *testing.B, ctx context.Context, nodes int) *bench {
	b.Helper()
	lease := heartbeatLease(nodes)
	dir := b.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditlog.Policy(auditlog.AutoscalerUser)), 0o600); err != nil {
		b.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.log")
	c, err := testkwok.StartCluster(ctx, testkwok.ClusterOptions{
		// kwokctl's lease: renewed every 10 s per node.
		Kwok: testkwok.Options{LeaseDuration: lease, Parallelism: 16},
		// A node whose lease is not renewed within the grace period turns
		// NotReady: at least the lease (the default, 50 s, fits 40 s).
		ControllerManagerArgs: []string{fmt.Sprintf("--node-monitor-grace-period=%s", max(50*time.Second, lease+10*time.Second))},
		APIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + audit, "--audit-log-format=json",
			"--audit-log-mode=batch", "--audit-log-maxsize=0"},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Stop)
	e := &bench{b: b, ctx: ctx, cluster: c, audit: audit, fleet: nodes}
	if _, err := c.CP.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := testkwok.WaitFor(ctx, time.Minute, 200*time.Millisecond, "default ServiceAccount", func() error {
		_, err := c.CP.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	class := fx.Class("gpu", driver, gpuResource, time.Time{})
	class.UID, class.CreationTimestamp = "", metav1.Time{}
	if _, err := c.CP.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return e
}

// group is the benchmark's node group: cpu CPUs and devices GPUs of
// driver a node, kwok's bounds.
type group struct {
	name             string
	minSize, maxSize int
	cpu              int64
	devices          int
}

func (g group) planning() *nodegroup.NodeGroup {
	ng := &nodegroup.NodeGroup{}
	ng.Name = g.name
	ng.Spec.MinSize, ng.Spec.MaxSize = g.minSize, g.maxSize
	t := fx.Node(g.name+"-template", g.cpu, 4*g.cpu, v1.ResourceList{v1.ResourcePods: fx.Count(110)})
	t.UID, t.Status.Conditions = "", nil
	t.Labels = map[string]string{groupLabel: g.name}
	ng.Spec.Template = *t
	if g.devices > 0 {
		spec := fx.DeviceSlice("x", driver, g.devices, "gpu").Spec
		spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
		ng.Spec.ResourceSlices = []resourceapi.ResourceSliceSpec{spec}
	}
	return ng
}

// configure writes the kwok provider's ConfigMaps (CA's format) for the
// groups.
func (e *bench) configure(groups ...group) {
	e.b.Helper()
	var templates []*v1.Node
	for _, g := range groups {
		ng := g.planning()
		t := ng.Spec.Template.DeepCopy()
		t.Annotations = map[string]string{kwok.MinSizeAnnotation: fmt.Sprint(g.minSize), kwok.MaxSizeAnnotation: fmt.Sprint(g.maxSize)}
		if len(ng.Spec.ResourceSlices) > 0 {
			b, err := yaml.Marshal(ng.Spec.ResourceSlices)
			if err != nil {
				e.b.Fatal(err)
			}
			t.Annotations[capi.TemplateSlicesAnnotation] = string(b)
		}
		templates = append(templates, t)
	}
	config := "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: " + groupLabel +
		"\nnodes:\n  skipTaint: true\nconfigmap:\n  name: " + kwok.DefaultTemplatesName + "\n"
	if err := e.cluster.Configure(e.ctx, "kube-system", config, templates...); err != nil {
		e.b.Fatal(err)
	}
}

// addNodes creates n members of the group as the kwok provider makes them
// (annotations, provider ID, slices), for a fleet that exists before the
// autoscaler starts.
func (e *bench) addNodes(g group, n int) []string {
	e.b.Helper()
	ng := g.planning()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", g.name, i)
	}
	err := parallel(e.ctx, names, func(ctx context.Context, name string) error {
		node, slices := ng.NewNode(name)
		node.Status.Conditions = nil
		node.Spec.ProviderID = kwok.ProviderIDPrefix + name
		node.Annotations = map[string]string{kwok.FakeNodeAnnotation: kwok.FakeNodeValue, kwok.GroupNameAnnotation: g.name}
		created, err := apinodes.CreateNode(ctx, e.cluster.CP.Client, g.name, node)
		if err != nil {
			return err
		}
		return apinodes.PublishSlices(ctx, e.cluster.CP.Client, created, slices)
	})
	if err != nil {
		e.b.Fatal(err)
	}
	return names
}

// parallel is apinodes.For with more workers: the benchmark's client is
// the admin's, not a provider's.
func parallel(ctx context.Context, names []string, f func(ctx context.Context, name string) error) error {
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if err := f(ctx, name); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	return first
}

// watcher follows nodes and pods through informers: when the first node
// of the group appeared, how many are Ready, how many pods are bound and
// running.
type watcher struct {
	firstNode             atomic.Int64 // unix nanos
	lastBound             atomic.Int64
	nodes, ready, running atomic.Int64
	bound                 atomic.Int64
	mu                    sync.Mutex
	readySet, boundSet    map[string]bool
	runningSet, nodeSet   map[string]bool
}

func (e *bench) watch(group string) *watcher {
	e.b.Helper()
	w := &watcher{readySet: map[string]bool{}, boundSet: map[string]bool{}, runningSet: map[string]bool{}, nodeSet: map[string]bool{}}
	f := informers.NewSharedInformerFactory(e.cluster.CP.Client, 0)
	node := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok || n.Labels[groupLabel] != group {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.nodeSet[n.Name] {
			w.nodeSet[n.Name] = true
			w.nodes.Add(1)
			w.firstNode.CompareAndSwap(0, time.Now().UnixNano())
		}
		if !w.readySet[n.Name] && ready(n) {
			w.readySet[n.Name] = true
			w.ready.Add(1)
		}
	}
	pod := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Namespace != namespace {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if p.Spec.NodeName != "" && !w.boundSet[p.Name] {
			w.boundSet[p.Name] = true
			w.bound.Add(1)
			w.lastBound.Store(time.Now().UnixNano())
		}
		if p.Status.Phase == v1.PodRunning && !w.runningSet[p.Name] {
			w.runningSet[p.Name] = true
			w.running.Add(1)
		}
	}
	if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: node, UpdateFunc: func(_, n any) { node(n) }}); err != nil {
		e.b.Fatal(err)
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: pod, UpdateFunc: func(_, p any) { pod(p) }}); err != nil {
		e.b.Fatal(err)
	}
	stop := make(chan struct{})
	e.b.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return w
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// waitCount waits until got() reaches want, logging progress each minute.
func (e *bench) waitCount(what string, want int64, timeout time.Duration, got func() int64) {
	e.b.Helper()
	last := time.Now()
	if err := testkwok.WaitFor(e.ctx, timeout, 200*time.Millisecond, what, func() error {
		n := got()
		if time.Since(last) > time.Minute {
			e.b.Logf("%s: %d of %d", what, n, want)
			last = time.Now()
		}
		if n < want {
			return fmt.Errorf("%d of %d", n, want)
		}
		return nil
	}); err != nil {
		e.b.Fatal(err)
	}
}

// auditCounts counts the autoscaler's completed requests in the audit
// log from offset on.
func (e *bench) auditCounts(offset int64) auditlog.Counts {
	e.b.Helper()
	c, _, err := auditlog.Read(e.audit, offset, auditlog.AutoscalerUser)
	if err != nil {
		e.b.Fatal(err)
	}
	return c
}

// auditSize is the log's current end: requests before it are not counted.
func (e *bench) auditSize() int64 {
	e.b.Helper()
	// The batch backend flushes every second or so.
	time.Sleep(2 * time.Second)
	next, err := auditlog.End(e.audit)
	if err != nil {
		e.b.Fatal(err)
	}
	return next
}

// loops reads the autoscaler's count and total seconds of main loops
// (zero when its /metrics does not answer).
func loops(b *testing.B, addr string) (count, seconds float64) {
	count, seconds, _ = auditlog.Loops(b.Context(), addr)
	return count, seconds
}

// waitLoops waits until the autoscaler has run n more main loops than
// from, and returns the count and seconds then.
func (e *bench) waitLoops(addr string, from float64, n int, timeout time.Duration) (count, seconds float64) {
	e.b.Helper()
	count, seconds, err := auditlog.WaitLoops(e.ctx, addr, from, n, timeout)
	if err != nil {
		e.b.Fatal(err)
	}
	return count, seconds
}

// usage is a process's CPU time and peak resident memory, from /proc.
func usage(pid int) (cpu time.Duration, peakRSSMiB float64) {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th, in clock ticks (100 a second on Linux).
		if i := strings.LastIndexByte(string(data), ')'); i > 0 {
			f := strings.Fields(string(data)[i+1:])
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(u+s) * 10 * time.Millisecond
			}
		}
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				peakRSSMiB = kb / 1024
			}
		}
	}
	return cpu, peakRSSMiB
}
