package plugins

import (
	"context"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/scheduler/classes"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// chainedDRA stands for kube-scheduler's DRA manager, whose resolver is
// the upstream cache that kube-scheduler chains its requeue handler to.
type chainedDRA struct {
	fwk.SharedDRAManager
	cache *extendedresourcecache.ExtendedResourceCache
}

func (m chainedDRA) DeviceClassResolver() fwk.DeviceClassResolver { return m.cache }

// On a DeviceClass event, kube-scheduler's handler that moves pending pods
// back to the active queue runs after the upstream cache is updated. By
// then draxr's index must have the change too, or a retried pod reads the
// old mapping and waits for the next flush of the unschedulable queue.
func TestClassChangeIndexedBeforeRetry(t *testing.T) {
	upstream := extendedresourcecache.NewExtendedResourceCache(klog.Background())
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	resolver := NewResolvers().WithResolver(testHandle{factory: factory, dra: chainedDRA{cache: upstream}}).SharedDRAManager().DeviceClassResolver()

	// What kube-scheduler's requeue handler would read, per event.
	var seen []string
	record := func() {
		got := ""
		if c := resolver.GetDeviceClass(gpu); c != nil {
			got = c.Name
		}
		seen = append(seen, got)
	}
	// kube-scheduler adds its handler after the plugins are built.
	upstream.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { record() },
		UpdateFunc: func(any, any) { record() },
		DeleteFunc: func(any) { record() },
	})

	old, newer := class("old", t0, gpu), class("new", t1, gpu)
	cleared := newer.DeepCopy()
	cleared.Spec.ExtendedResourceName = nil
	// The informer delivers events to the upstream cache; nothing else.
	upstream.OnAdd(old, false)
	upstream.OnAdd(newer, false)
	upstream.OnUpdate(newer, cleared)
	upstream.OnDelete(old)
	want := []string{"old", "new", "old", ""}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("requeue handler read %q, want %q (draxr's index updated before the retry)", seen, want)
	}
}

var registerMetrics sync.Once

// newCycleFramework builds the wrapped Fit and DynamicResources plugins
// over snap, with draxr's resolver fed by factory; it returns the
// framework and the resolver.
func newCycleFramework(t *testing.T, snap *snapshot.Snapshot) (framework.Framework, *cycleResolver) {
	t.Helper()
	registerMetrics.Do(schedmetrics.Register)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	rs := NewResolvers()
	profile := &config.KubeSchedulerProfile{
		SchedulerName: "cycle-test",
		Plugins: &config.Plugins{MultiPoint: config.PluginSet{Enabled: []config.Plugin{
			{Name: queuesort.Name}, {Name: defaultbinder.Name},
			{Name: aliases.Names()[names.NodeResourcesFit]}, {Name: aliases.Names()[names.DynamicResources]},
		}}},
	}
	registry := frameworkruntime.Registry{queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New}
	if err := registry.Merge(aliases.Registry(rs.WithResolver, &aliases.DeviceFull{})); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworkruntime.NewFramework(context.Background(), registry, profile,
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithSharedDRAManager(snap),
		frameworkruntime.WithLogger(klog.Background()))
	if err != nil {
		t.Fatal(err)
	}
	r := rs.byFactory[factory]
	if r == nil {
		t.Fatal("the plugins were not built with draxr's resolver")
	}
	return fw, r
}

// A class that starts backing a name after DynamicResources' PreFilter
// and before Filter must not reach Filter: NodeResourcesFit would leave
// the GPU to DRA while DynamicResources, which saw no class, allocates
// nothing, and the pod would bind without its device. The cycle reads the
// mapping it began with; the next cycle reads the new one.
func TestOneMappingPerCycle(t *testing.T) {
	snap := snapshot.New()
	gpuClass := fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch)
	snap.SetDeviceClass(gpuClass)
	if err := snap.AddNode(fx.Node("gpu-node", 16, 64, nil)); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddResourceSlice(fx.GPUSlice("gpu-node", 4)); err != nil {
		t.Fatal(err)
	}
	fw, r := newCycleFramework(t, snap)
	ctx := context.Background()
	pod := fx.Pod("trainer", 500, fx.GPUs(fx.GPUResource, 1))

	state := framework.NewCycleState()
	if _, st, _ := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	r.index.Set(gpuClass) // the informer's event, mid-cycle
	st := fw.RunFilterPlugins(ctx, state, pod, snap.NodeInfo("gpu-node"))
	if st.IsSuccess() {
		t.Fatal("Filter accepted the node with the class that arrived mid-cycle: the pod would bind without a claim")
	}
	if !strings.Contains(strings.Join(st.Reasons(), ";"), "Insufficient "+string(fx.GPUResource)) {
		t.Errorf("Filter: %v, want Insufficient %s (the name was not DRA-backed when the cycle began)", st.Reasons(), fx.GPUResource)
	}
	fw.RunPostFilterPlugins(ctx, state, pod, framework.NewDefaultNodeToStatus())
	if got := r.GetDeviceClass(fx.GPUResource); got == nil {
		t.Error("after the cycle ended the resolver still answers with the cycle's mapping")
	}

	next := framework.NewCycleState()
	if _, st, _ := fw.RunPreFilterPlugins(ctx, next, pod); !st.IsSuccess() {
		t.Fatalf("next cycle PreFilter: %v", st)
	}
	if st := fw.RunFilterPlugins(ctx, next, pod, snap.NodeInfo("gpu-node")); !st.IsSuccess() {
		t.Errorf("next cycle Filter: %v, want the node (the class backs the name now)", st)
	}
}

// PreBind refuses a pod whose name stopped resolving after its cycle
// began, naming the class and the resource; a name still backed (by any
// class) and a pod without DRA-backed names pass.
func TestVerifyBeforeBind(t *testing.T) {
	tests := []struct {
		name    string
		change  func(r *cycleResolver)
		pod     *v1.Pod
		wantErr string
	}{
		{
			name:    "class deleted",
			change:  func(r *cycleResolver) { r.index.Delete("old") },
			pod:     fx.Pod("p", 500, fx.GPUs(gpu, 1)),
			wantErr: "DeviceClass old stopped backing " + string(gpu),
		},
		{
			name: "name cleared",
			change: func(r *cycleResolver) {
				c := class("old", t0, "")
				r.index.Set(c)
			},
			pod:     fx.Pod("p", 500, fx.GPUs(gpu, 1)),
			wantErr: "DeviceClass old stopped backing " + string(gpu),
		},
		{
			name:   "another class takes over",
			change: func(r *cycleResolver) { r.index.Set(class("new", t1, gpu)); r.index.Delete("old") },
			pod:    fx.Pod("p", 500, fx.GPUs(gpu, 1)),
		},
		{
			name:   "pod asks no DRA-backed name",
			change: func(r *cycleResolver) { r.index.Delete("old") },
			pod:    fx.Pod("p", 500, nil),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &cycleResolver{index: newIndexWith(class("old", t0, gpu))}
			state := framework.NewCycleState()
			r.BeginCycle(state)
			r.EndCycle()
			tt.change(r)
			st := r.Verify(state, tt.pod)
			switch {
			case tt.wantErr == "" && !st.IsSuccess():
				t.Errorf("Verify: %v, want success", st)
			case tt.wantErr != "" && st.Code() != fwk.Unschedulable:
				t.Errorf("Verify: %v, want Unschedulable", st)
			case tt.wantErr != "" && !strings.Contains(st.Message(), tt.wantErr):
				t.Errorf("Verify: %q, want it to say %q", st.Message(), tt.wantErr)
			}
		})
	}
}

func newIndexWith(cs ...*resourceapi.DeviceClass) *classes.Locked {
	l := classes.NewLocked()
	for _, c := range cs {
		l.Set(c)
	}
	return l
}
