package aliases_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/scheduler/classes"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

var registerMetrics sync.Once

// profile is kube-scheduler's default profile; with useAliases, the three
// wrapped plugins are replaced by draxr's names, as the shipped
// configuration does, and args are given as raw JSON when fitArgs is set.
func profile(t testing.TB, useAliases bool, fitArgs string) *config.KubeSchedulerProfile {
	t.Helper()
	cfg, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Profiles[0]
	if !useAliases {
		return &p
	}
	var enabled []config.Plugin
	for _, pl := range p.Plugins.MultiPoint.Enabled {
		if alias, ok := aliases.Names()[pl.Name]; ok {
			p.Plugins.MultiPoint.Disabled = append(p.Plugins.MultiPoint.Disabled, config.Plugin{Name: pl.Name})
			pl.Name = alias
		}
		enabled = append(enabled, pl)
	}
	p.Plugins.MultiPoint.Enabled = enabled
	var pcs []config.PluginConfig
	for _, pc := range p.PluginConfig {
		if _, wrapped := aliases.Names()[pc.Name]; !wrapped {
			pcs = append(pcs, pc)
		}
	}
	if fitArgs != "" {
		pcs = append(pcs, config.PluginConfig{Name: "DraxrNodeResourcesFit", Args: &runtime.Unknown{Raw: []byte(fitArgs)}})
	}
	p.PluginConfig = pcs
	return &p
}

func newFramework(t *testing.T, snap *snapshot.Snapshot, p *config.KubeSchedulerProfile) (framework.Framework, error) {
	t.Helper()
	return newFrameworkWith(t, snap, p, true)
}

// newFrameworkWith builds the profile with DraxrDynamicResources answering
// device-full nodes itself (the scheduler's registry) or not (the planner's).
func newFrameworkWith(t testing.TB, snap *snapshot.Snapshot, p *config.KubeSchedulerProfile, deviceFullNodes bool) (framework.Framework, error) {
	t.Helper()
	registerMetrics.Do(schedmetrics.Register)
	registry := plugins.NewInTreeRegistry()
	var deviceFull *aliases.DeviceFull
	if deviceFullNodes {
		// Taken at any size here; the scheduler's threshold is for speed.
		deviceFull = &aliases.DeviceFull{}
	}
	if err := registry.Merge(aliases.Registry(nil, deviceFull)); err != nil {
		t.Fatal(err)
	}
	return frameworkruntime.NewFramework(context.Background(), registry, p,
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(nil, 0)),
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithSharedDRAManager(snap),
		frameworkruntime.WithLogger(klog.Background().V(5)))
}

// rename maps upstream plugin names to draxr's in a plugin list.
func rename(ps []config.Plugin) []config.Plugin {
	out := make([]config.Plugin, len(ps))
	for i, p := range ps {
		if alias, ok := aliases.Names()[p.Name]; ok {
			p.Name = alias
		}
		out[i] = p
	}
	return out
}

// Every alias is registered, and a profile using the aliases runs them at
// the same extension points, in the same order, with the same weights as
// the upstream plugins in the default profile.
func TestAliasesTakeUpstreamPlaces(t *testing.T) {
	reg := aliases.Registry(nil, &aliases.DeviceFull{})
	if len(reg) != len(aliases.Names()) {
		t.Fatalf("registry has %d names, want %d", len(reg), len(aliases.Names()))
	}
	for upstream, alias := range aliases.Names() {
		if _, ok := reg[alias]; !ok {
			t.Errorf("alias %s of %s is not registered", alias, upstream)
		}
	}
	snap := snapshot.New()
	up, err := newFramework(t, snap, profile(t, false, ""))
	if err != nil {
		t.Fatal(err)
	}
	al, err := newFramework(t, snap, profile(t, true, ""))
	if err != nil {
		t.Fatal(err)
	}
	want, got := up.ListPlugins(), al.ListPlugins()
	points := map[string][2][]config.Plugin{
		"PreFilter":  {want.PreFilter.Enabled, got.PreFilter.Enabled},
		"Filter":     {want.Filter.Enabled, got.Filter.Enabled},
		"PostFilter": {want.PostFilter.Enabled, got.PostFilter.Enabled},
		"PreScore":   {want.PreScore.Enabled, got.PreScore.Enabled},
		"Score":      {want.Score.Enabled, got.Score.Enabled},
		"Reserve":    {want.Reserve.Enabled, got.Reserve.Enabled},
		"PreBind":    {want.PreBind.Enabled, got.PreBind.Enabled},
	}
	for point, pair := range points {
		t.Run(point, func(t *testing.T) {
			if !reflect.DeepEqual(rename(pair[0]), pair[1]) {
				t.Errorf("aliased %s plugins = %v, want %v", point, pair[1], rename(pair[0]))
			}
		})
	}
}

func TestAliasArgs(t *testing.T) {
	tests := []struct {
		name    string
		fitArgs string
		wantErr string
	}{
		{name: "no args: upstream defaults"},
		{name: "raw JSON args", fitArgs: `{"scoringStrategy":{"type":"MostAllocated","resources":[{"name":"cpu","weight":1},{"name":"example.com/gpu","weight":3}]}}`},
		{name: "empty raw args: upstream defaults", fitArgs: `{}`},
		{name: "malformed JSON names the alias", fitArgs: `{"scoringStrategy":`, wantErr: "DraxrNodeResourcesFit: pluginConfig args"},
		{name: "wrong field type names the alias", fitArgs: `{"scoringStrategy":{"resources":"cpu"}}`, wantErr: "DraxrNodeResourcesFit: pluginConfig args"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newFramework(t, snapshot.New(), profile(t, true, tt.fitArgs))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("building the framework: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// An aliased plugin is the upstream plugin under another name: a profile
// with the aliases gives the same PreFilter, Filter and Score results as
// one with the upstream plugins.
func TestAliasesBehaveAsUpstream(t *testing.T) {
	implicit := classes.ImplicitName("gpu.example.com")
	tests := []struct {
		name   string
		full   bool // gpu-4's devices all allocated
		claims []*resourceapi.ResourceClaim
		pod    *v1.Pod
	}{
		{name: "CPU fits everywhere", pod: fx.Pod("small", 500, nil)},
		{name: "CPU fits only the big node", pod: fx.Pod("wide", 10000, nil)},
		{name: "CPU fits nowhere", pod: fx.Pod("huge", 100000, nil)},
		{name: "DRA-backed GPUs, explicit name", pod: fx.Pod("gpu2", 500, fx.GPUs(fx.GPUResource, 2))},
		{name: "DRA-backed GPUs, implicit name", pod: fx.Pod("gpu4", 500, fx.GPUs(implicit, 4))},
		{name: "more GPUs than any node", pod: fx.Pod("gpu9", 500, fx.GPUs(fx.GPUResource, 9))},
		{name: "device-plugin resource", pod: fx.Pod("fpga", 500, fx.GPUs("example.com/fpga", 1))},
		{name: "ResourceClaim by name", pod: fx.WithClaim(fx.Pod("claim", 500, nil), "gpu", "shared-gpu")},
		{name: "ResourceClaim that does not exist", pod: fx.WithClaim(fx.Pod("missing", 500, nil), "gpu", "missing")},
		{name: "full node, DRA-backed GPU", full: true, pod: fx.Pod("gpu1", 500, fx.GPUs(fx.GPUResource, 1))},
		{name: "full node, implicit name", full: true, pod: fx.Pod("gpu1i", 500, fx.GPUs(implicit, 1))},
		{name: "full node, GPU and a device-plugin resource", full: true,
			pod: fx.Pod("mixed", 500, v1.ResourceList{fx.GPUResource: fx.Count(1), "example.com/fpga": fx.Count(1)})},
		{name: "full node, GPU and a resource nobody offers", full: true,
			pod: fx.Pod("unknown", 500, v1.ResourceList{fx.GPUResource: fx.Count(1), "example.com/nothing": fx.Count(1)})},
		{name: "full node, own claim", full: true, claims: []*resourceapi.ResourceClaim{fx.Claim("one", "gpu.example.com", 1)},
			pod: fx.WithClaim(fx.Pod("own", 500, nil), "gpu", "one")},
		{name: "full node, claim allocated already", full: true,
			claims: []*resourceapi.ResourceClaim{fx.Allocated("held", "gpu.example.com", fx.Driver, "gpu-8", "gpu-0")},
			pod:    fx.WithClaim(fx.Pod("held", 500, nil), "gpu", "held")},
		{name: "full node, every GPU taken", full: true,
			claims: []*resourceapi.ResourceClaim{fx.Allocated("rest", "gpu.example.com", fx.Driver, "gpu-8",
				"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7")},
			pod: fx.Pod("late", 500, fx.GPUs(fx.GPUResource, 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var results [2]string
			for i, useAliases := range []bool{false, true} {
				snap := cluster(t)
				if tt.full {
					// Every device of gpu-4 taken: DraxrDynamicResources
					// answers that node itself (devicefull).
					snap.SetResourceClaim(fx.Allocated("taken", "gpu.example.com", fx.Driver, "gpu-4", "gpu-0", "gpu-1", "gpu-2", "gpu-3"))
				}
				for _, c := range tt.claims {
					snap.SetResourceClaim(c)
				}
				fw, err := newFramework(t, snap, profile(t, useAliases, ""))
				if err != nil {
					t.Fatal(err)
				}
				results[i] = schedule(t, fw, snap, tt.pod.DeepCopy())
			}
			if results[0] != results[1] {
				t.Errorf("upstream plugins:\n%s\naliases:\n%s", results[0], results[1])
			}
		})
	}
}

// cluster: a small CPU node, a big CPU node with a device plugin, two
// nodes with 4 and 8 DRA GPUs, and a claim for 6 GPUs.
func cluster(t *testing.T) *snapshot.Snapshot {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	snap.SetResourceClaim(fx.Claim("shared-gpu", "gpu.example.com", 6))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(snap.AddNode(fx.Node("small", 4, 16, nil)))
	must(snap.AddNode(fx.Node("big", 32, 128, fx.GPUs("example.com/fpga", 2))))
	for _, gpus := range []int{4, 8} {
		name := fmt.Sprintf("gpu-%d", gpus)
		must(snap.AddNode(fx.Node(name, 16, 64, nil)))
		must(snap.AddResourceSlice(fx.GPUSlice(name, gpus)))
	}
	return snap
}

// schedule runs PreFilter, Filter on every node and Score on the feasible
// ones, and prints what a user of the scheduler would see, with plugin
// names mapped back to upstream's.
func schedule(t *testing.T, fw framework.Framework, snap *snapshot.Snapshot, pod *v1.Pod) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	state := framework.NewCycleState()
	_, st, _ := fw.RunPreFilterPlugins(ctx, state, pod)
	fmt.Fprintf(&b, "prefilter: %s\n", status(st))
	if !st.IsSuccess() {
		return b.String()
	}
	var feasible []fwk.NodeInfo
	for _, name := range snap.NodeNames() {
		ni := snap.NodeInfo(name)
		st := fw.RunFilterPlugins(ctx, state, pod, ni)
		fmt.Fprintf(&b, "filter %s: %s\n", name, status(st))
		if st.IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return b.String()
	}
	if st := fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		fmt.Fprintf(&b, "prescore: %s\n", status(st))
		return b.String()
	}
	scores, st := fw.RunScorePlugins(ctx, state, pod, feasible)
	fmt.Fprintf(&b, "score: %s\n", status(st))
	for _, s := range scores {
		fmt.Fprintf(&b, "  %s total %d:", s.Name, s.TotalScore)
		for _, ps := range s.Scores {
			fmt.Fprintf(&b, " %s=%d", upstreamName(ps.Name), ps.Score)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func status(st *fwk.Status) string {
	if st.IsSuccess() {
		return "Success"
	}
	return fmt.Sprintf("%s %s %v", st.Code(), upstreamName(st.Plugin()), st.Reasons())
}

func upstreamName(name string) string {
	for upstream, alias := range aliases.Names() {
		if name == alias {
			return upstream
		}
	}
	return name
}

// BenchmarkFilterFullFleet: one pod asking a DRA-backed GPU filtered on
// every node of a fleet whose 8-GPU nodes are all full but one, as the
// scheduler does while a scale-up fills new nodes: upstream's allocator
// searches every slice of the cluster for each node it rejects.
func BenchmarkFilterFullFleet(b *testing.B) {
	for _, n := range []int{500, 1500, 5000} {
		snap := snapshot.New()
		snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
		for i := range n {
			name := fmt.Sprintf("gpu-%05d", i)
			if err := snap.AddNode(fx.Node(name, 32, 128, nil)); err != nil {
				b.Fatal(err)
			}
			if err := snap.AddResourceSlice(fx.GPUSlice(name, 8)); err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				devices := make([]string, 8)
				for d := range devices {
					devices[d] = fmt.Sprintf("gpu-%d", d)
				}
				snap.SetResourceClaim(fx.Allocated("taken-"+name, "gpu.example.com", fx.Driver, name, devices...))
			}
		}
		for _, deviceFull := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/device-full-nodes=%t", n, deviceFull), func(b *testing.B) {
				fw, err := newFrameworkWith(b, snap, profile(b, true, ""), deviceFull)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				pod := fx.Pod("gpu1", 500, fx.GPUs(fx.GPUResource, 1))
				for b.Loop() {
					state := framework.NewCycleState()
					if _, st, _ := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
						b.Fatal(st)
					}
					fits := 0
					for _, name := range snap.NodeNames() {
						if fw.RunFilterPlugins(ctx, state, pod, snap.NodeInfo(name)).IsSuccess() {
							fits++
						}
					}
					if fits != 1 {
						b.Fatalf("pod fits %d nodes, want 1", fits)
					}
				}
			})
		}
	}
}
