package core

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/taints"
)

// scrape gathers the registry /metrics serves and returns the value of the
// series name{labels} (labels match exactly): a counter or gauge's value, a
// histogram's sample count; 0 when the series does not exist.
func scrape(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) || !testutil.LabelsMatch(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// After a simulated scale-up, CA's metric names carry the scale-up with
// CA's labels, the gauges describe the loop's cluster, and draxr's own
// count the DRA devices planned and the extended-resource pods helped.
func TestScaleUpMetrics(t *testing.T) {
	a, provider, group, recorder := setup(t, unschedulablePods(20)...)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	group.EXPECT().IncreaseSize(gomock.Any(), 3).Return(nil)
	scaledUp := map[string]string{"gpu_resource_name": "", "gpu_name": "", "dra_drivers": fx.Driver}
	planned := map[string]string{"device_class": "gpu.example.com"}
	helped := map[string]string{"resource": string(fx.GPUResource)}
	scaleUpTimed := map[string]string{"function": metrics.FunctionScaleUp}
	before := map[string]float64{
		"scaled_up": scrape(t, "cluster_autoscaler_scaled_up_nodes_total", scaledUp),
		"planned":   scrape(t, "draxr_autoscaler_planned_devices_total", planned),
		"helped":    scrape(t, "draxr_autoscaler_extended_resource_pods_helped_total", helped),
		"timed":     scrape(t, "cluster_autoscaler_function_duration_seconds", scaleUpTimed),
	}
	if _, err := a.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cluster_autoscaler_scaled_up_nodes_total", scaledUp, before["scaled_up"] + 3},
		{"draxr_autoscaler_planned_devices_total", planned, before["planned"] + 20},
		{"draxr_autoscaler_extended_resource_pods_helped_total", helped, before["helped"] + 20},
		{"cluster_autoscaler_function_duration_seconds", scaleUpTimed, before["timed"] + 1},
		{"cluster_autoscaler_unschedulable_pods_count", map[string]string{"type": "unschedulable"}, 20},
		{"cluster_autoscaler_cluster_safe_to_autoscale", map[string]string{}, 1},
		{"cluster_autoscaler_node_groups_count", map[string]string{"node_group_type": "autoscaled"}, 1},
		{"cluster_autoscaler_max_nodes_count", map[string]string{}, 10},
		{"cluster_autoscaler_nodes_count", map[string]string{"state": "ready"}, 0},
	} {
		if got := scrape(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := scrape(t, "cluster_autoscaler_last_activity", map[string]string{"activity": metrics.FunctionScaleUp}); got <= 0 {
		t.Errorf("last_activity{activity=scaleUp} = %v, want the loop's time", got)
	}
	var scaledUpGroup bool
	for _, e := range events(recorder) {
		scaledUpGroup = scaledUpGroup || strings.Contains(e, EventScaledUpGroup+" Scale-up: setting group gpu size to 3 instead of 0 (max: 10)")
	}
	if !scaledUpGroup {
		t.Error("no ScaledUpGroup event for gpu 0->3")
	}
}

// --max-nodes-total keeps pods pending: CA's MaxNodesTotalReached event on
// the status ConfigMap and the planner's reason counted by draxr.
func TestMaxNodesTotalReached(t *testing.T) {
	a, provider, group, recorder := setup(t, unschedulablePods(20)...)
	a.cfg.MaxNodesTotal = 1
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	group.EXPECT().IncreaseSize(gomock.Any(), 1).Return(nil)
	if _, err := a.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	reached := false
	for _, e := range events(recorder) {
		reached = reached || strings.Contains(e, EventMaxNodesTotalReached+" Max total nodes in cluster reached: 1")
	}
	if !reached {
		t.Error("no MaxNodesTotalReached event")
	}
	if got := scrape(t, "cluster_autoscaler_max_nodes_count", map[string]string{}); got != 1 {
		t.Errorf("max_nodes_count = %v, want 1 (capped by --max-nodes-total)", got)
	}
	if got := scrape(t, "draxr_autoscaler_unhelpable_pods", map[string]string{"reason": "MaxNodesTotalReached"}); got != 12 {
		t.Errorf("unhelpable_pods{reason=MaxNodesTotalReached} = %v, want 12 (20 pods, one 8-GPU node)", got)
	}
}

// Removing an underutilized node: CA's counters and events (ScaleDown on
// the evicted pod and on the status ConfigMap).
func TestScaleDownMetricsAndEvents(t *testing.T) {
	e := newSDEnv(t, ScaleDownActuation{}, cpuNode("keep"), cpuNode("light"), rsPod("big", "keep", 5000), rsPod("a", "light", 1000))
	e.deleteNodeObjects(1)
	down := map[string]string{"reason": metrics.ScaleDownUnderutilized, "gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}
	evicted := map[string]string{"eviction_result": metrics.EvictionSucceeded}
	downBefore, evictedBefore := scrape(t, "cluster_autoscaler_scaled_down_nodes_total", down), scrape(t, "cluster_autoscaler_evicted_pods_total", evicted)
	if res := e.loop(t); strings.Join(res.Removed, ",") != "light" {
		t.Fatalf("removed %v, want light", res.Removed)
	}
	if got := scrape(t, "cluster_autoscaler_scaled_down_nodes_total", down); got != downBefore+1 {
		t.Errorf("scaled_down_nodes_total%v = %v, want %v", down, got, downBefore+1)
	}
	if got := scrape(t, "cluster_autoscaler_evicted_pods_total", evicted); got != evictedBefore+1 {
		t.Errorf("evicted_pods_total{succeeded} = %v, want %v", got, evictedBefore+1)
	}
	var onPod, onStatus, onNode bool
	for _, ev := range events(e.recorder) {
		onPod = onPod || strings.Contains(ev, "ScaleDown deleting pod for node scale down")
		onStatus = onStatus || strings.Contains(ev, "ScaleDown Scale-down: removing node light")
		onNode = onNode || strings.Contains(ev, "ScaleDown node removed by draxr-autoscaler")
	}
	if !onPod || !onStatus || !onNode {
		t.Errorf("ScaleDown events on pod %v, status ConfigMap %v, node %v; want all", onPod, onStatus, onNode)
	}
}

// CA's comparison of a node's published slices with its template's.
func TestCompareSlices(t *testing.T) {
	slice := func(driver, pool string, devices int, attrs ...string) *resourceapi.ResourceSlice {
		s := fx.GPUSlice(pool, devices)
		s.Spec.Driver = driver
		s.Spec.Pool.Name = pool
		s.Spec.Pool.ResourceSliceCount = 1
		if len(attrs) > 0 {
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
				for _, a := range attrs {
					v := a
					s.Spec.Devices[i].Attributes[resourceapi.QualifiedName(a)] = resourceapi.DeviceAttribute{StringValue: &v}
				}
			}
		}
		return s
	}
	tmpl := []*resourceapi.ResourceSlice{slice("gpu.x", "n1", 8, "model")}
	inFlux := slice("gpu.x", "n1", 4, "model")
	inFlux.Spec.Pool.ResourceSliceCount = 2 // the pool's second slice not published yet
	tests := []struct {
		name string
		node []*resourceapi.ResourceSlice
		want map[metrics.MismatchKey]int
	}{
		{"same devices", []*resourceapi.ResourceSlice{slice("gpu.x", "n1", 8, "model")}, map[metrics.MismatchKey]int{}},
		{"fewer devices", []*resourceapi.ResourceSlice{slice("gpu.x", "n1", 4, "model")},
			map[metrics.MismatchKey]int{{Driver: "gpu.x", Type: metrics.MismatchMismatch}: 1}},
		{"nothing published", nil, map[metrics.MismatchKey]int{{Driver: "gpu.x", Type: metrics.MismatchMissing}: 1}},
		{"another driver too", []*resourceapi.ResourceSlice{slice("gpu.x", "n1", 8, "model"), slice("nic.y", "n1", 2)},
			map[metrics.MismatchKey]int{{Driver: "nic.y", Type: metrics.MismatchExtra}: 1}},
		// As CA: a driver still publishing is not compared.
		{"pool still being published", []*resourceapi.ResourceSlice{inFlux}, map[metrics.MismatchKey]int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := compareSlices(tmpl, tc.node)
			if len(got) != len(tc.want) {
				t.Fatalf("mismatches = %v, want %v", got, tc.want)
			}
			for k, n := range tc.want {
				if got[k] != n {
					t.Errorf("mismatches = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// Ready nodes of a group whose drivers published other devices than the
// group's template promised show in dra_node_template_resources_mismatch.
func TestTemplateMismatchMetric(t *testing.T) {
	ctrl := gomock.NewController(t)
	// Versioned, as an API server's: a node's device groups are kept from
	// loop to loop while its slices are the same objects.
	full, half := fx.GPUSlice("gpu-full", 8), fx.GPUSlice("gpu-half", 4)
	full.ResourceVersion, half.ResourceVersion = "1", "1"
	client := fake.NewClientset(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch),
		fx.Node("gpu-full", 64, 256, nil), full, fx.Node("gpu-half", 64, 256, nil), half)
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	group := mocks.NewMockNodeGroup(ctrl)
	tmpl, slices := (&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{Template: *fx.Node("t", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}).NewNode("template-gpu")
	group.EXPECT().Id().Return("mismatch-gpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(10).AnyTimes()
	group.EXPECT().TargetSize().Return(2, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(tmpl, slices, nil).AnyTimes()
	group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
	expectFlagOptions(group)
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(group, nil).AnyTimes()
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	exp, _ := expander.New("least-waste", nil, 1)
	a := New(Config{Client: client, View: listers, Provider: provider, Expander: exp, Recorder: record.NewFakeRecorder(100)})
	loop := func(mismatched, published float64, why string) {
		t.Helper()
		if _, err := a.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		for typ, want := range map[string]float64{metrics.MismatchMismatch: mismatched, metrics.MismatchMissing: 0, metrics.MismatchExtra: 0} {
			labels := map[string]string{"driver": fx.Driver, "mismatch_type": typ}
			if got := scrape(t, "cluster_autoscaler_dra_node_template_resources_mismatch", labels); got != want {
				t.Errorf("dra_node_template_resources_mismatch%v = %v, want %v (%s)", labels, got, want, why)
			}
		}
		if got := scrape(t, "draxr_autoscaler_devices", map[string]string{"driver": fx.Driver}); got != published {
			t.Errorf("draxr_autoscaler_devices{driver} = %v, want %v published (%s)", got, published, why)
		}
	}
	loop(1, 12, "gpu-half has 4 of 8 GPUs")
	loop(1, 12, "nothing changed")
	// The driver publishes all 8: the next loop reads the new slice.
	republished := fx.GPUSlice("gpu-half", 8)
	republished.ResourceVersion = "2"
	if _, err := client.ResourceV1().ResourceSlices().Update(ctx, republished, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		s, err := listers.Slices.Get(republished.Name)
		return err == nil && s.ResourceVersion == "2", nil
	}); err != nil {
		t.Fatal("the informer never saw the republished slice")
	}
	loop(0, 16, "gpu-half republished with 8 GPUs")
}

// A failed eviction: ScaleDownFailed on the pod and on the node, CA's
// failed eviction counter; an empty node goes with ScaleDownEmpty.
func TestScaleDownFailedAndEmptyEvents(t *testing.T) {
	e := newSDEnv(t, ScaleDownActuation{MaxDrainParallelism: 1}, cpuNode("keep"), cpuNode("light"), cpuNode("empty"),
		rsPod("big", "keep", 5000), rsPod("a", "light", 1000))
	e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	})
	e.deleteNodeObjects(1)
	failed := map[string]string{"eviction_result": metrics.EvictionFailed}
	before := scrape(t, "cluster_autoscaler_evicted_pods_total", failed)
	e.loop(t)
	if got := scrape(t, "cluster_autoscaler_evicted_pods_total", failed); got != before+1 {
		t.Errorf("evicted_pods_total{failed} = %v, want %v", got, before+1)
	}
	var onPod, onNode, empty bool
	for _, ev := range events(e.recorder) {
		onPod = onPod || strings.Contains(ev, "Warning ScaleDownFailed failed to delete pod for ScaleDown")
		onNode = onNode || strings.Contains(ev, "Warning ScaleDownFailed failed to remove node")
		empty = empty || strings.Contains(ev, `ScaleDownEmpty Scale-down: removing empty node "empty"`)
	}
	if !onPod || !onNode || !empty {
		t.Errorf("ScaleDownFailed on pod %v, on node %v; ScaleDownEmpty %v; want all", onPod, onNode, empty)
	}
}

// node_taints_count types, as CA reports them: the ignore-taint prefix as
// itself, known keys by key, startup and status taints (built-in and by
// flag) by kind, the rest "other".
func TestTaintTypes(t *testing.T) {
	flags := taints.Config{StartupTaints: []string{"node.cilium.io/agent-not-ready"}, StatusTaints: []string{"example.com/degraded"}}
	for key, want := range map[string]string{
		"ignore-taint.cluster-autoscaler.kubernetes.io/cni":     "ignore-taint.cluster-autoscaler.kubernetes.io/",
		"startup-taint.cluster-autoscaler.kubernetes.io/driver": "startup-taint",
		"status-taint.cluster-autoscaler.kubernetes.io/x":       "status-taint",
		"node.cilium.io/agent-not-ready":                        "startup-taint",
		"example.com/degraded":                                  "status-taint",
		ToBeDeletedTaint:                                        ToBeDeletedTaint,
		v1.TaintNodeNotReady:                                    v1.TaintNodeNotReady,
		"dedicated":                                             "other",
	} {
		if got := taintType(key, flags); got != want {
			t.Errorf("taintType(%q) = %q, want %q", key, got, want)
		}
	}
	if got := taintType("node.cilium.io/agent-not-ready", taints.Config{}); got != "other" {
		t.Errorf("without --startup-taint: %q, want other", got)
	}
}

// The device metrics count hardware: a DynamicMIG H100 node publishes 8
// GPUs (not 152 devices); two MIG partitions on one GPU are one GPU in
// use; plain devices (Gaudi) count one each.
func TestDeviceCountsCountHardware(t *testing.T) {
	gaudi := fx.GaudiSlice("gaudi-a", 8)
	slices := append(fx.NVIDIADynamicMIG("h100-a", 8), gaudi)
	claims := []*resourceapi.ResourceClaim{
		fx.Allocated("two-on-gpu0", "mig.nvidia.com", fx.NVIDIADriver, "h100-a", fx.MIGName(0, "1g.10gb", 0), fx.MIGName(0, "1g.10gb", 1)),
		fx.Allocated("one-on-gpu2", "mig.nvidia.com", fx.NVIDIADriver, "h100-a", fx.MIGName(2, "3g.40gb", 0)),
		fx.Allocated("whole", "gpu.nvidia.com", fx.NVIDIADriver, "h100-a", "gpu-1"),
		fx.Allocated("gaudis", "gaudi.intel.com", "gaudi.intel.com", "gaudi-a", gaudi.Spec.Devices[0].Name, gaudi.Spec.Devices[1].Name),
	}
	inUse, published := deviceCounts(slices, claims)
	if want := map[string]int{"gpu.nvidia.com": 8, "gaudi.intel.com": 8}; fmt.Sprint(published) != fmt.Sprint(want) {
		t.Errorf("published %v, want %v", published, want)
	}
	if want := map[string]int{"mig.nvidia.com": 2, "gpu.nvidia.com": 1, "gaudi.intel.com": 2}; fmt.Sprint(inUse) != fmt.Sprint(want) {
		t.Errorf("in use %v, want %v", inUse, want)
	}
}

// A GPU shared by three 20Gi shares of its 80Gi is 0.75 of a device in
// use (each share counted whole, it read 3); a monitor's admin-access
// claim of a whole device uses none of it.
func TestDeviceCountsCountSharesAndNotAdminAccess(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{fx.SharedGPUSlice("node-0"), fx.GPUSlice("node-1", 1)}
	var claims []*resourceapi.ResourceClaim
	for i := range 3 {
		c := fx.Allocated(fmt.Sprintf("share-%d", i), "gpu.example.com", fx.Driver, "node-0", "gpu-0")
		r := &c.Status.Allocation.Devices.Results[0]
		r.ShareID = ptr.To(types.UID(fmt.Sprintf("share-%d", i)))
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")}
		claims = append(claims, c)
	}
	admin := fx.Allocated("monitor", "gpu.example.com", fx.Driver, "node-1", "gpu-0")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	inUse, _ := deviceCounts(slices, append(claims, admin))
	if got := inUse["gpu.example.com"]; got < 0.7499 || got > 0.7501 {
		t.Errorf("in use %v, want 0.75 of a device for gpu.example.com", inUse)
	}
}
