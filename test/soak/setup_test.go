package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider/local"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/test/soak/checker"
)

// The soak's resources: a device-plugin GPU in nodes' allocatable, and
// DRA devices of one driver, asked for through a DeviceClass's extended
// resource name (KEP-5004) or through ResourceClaimTemplates.
const (
	pluginResource v1.ResourceName = "example.com/gpu"
	draResource    v1.ResourceName = "dra.example.com/gpu"
	draDriver                      = "gpu.soak.example.com"
	draClass                       = "soak-gpu"
	// migClass selects 3g.40gb placements of NVIDIA's DynamicMIG
	// partitionable GPUs (shared counters): two fit a GPU.
	migClass   = "soak-mig"
	migProfile = "3g.40gb"
	migPerGPU  = 2
	namespace  = "soak"
	// shapeAnnotation on a pod template names what its pods ask for, so
	// the checker knows a pod's demand without reading claims.
	shapeAnnotation = "soak.draxr.dev/shape"
	// runtimeAnnotation on a Job's pods: seconds they run once bound.
	runtimeAnnotation = "soak.draxr.dev/runtime"
)

// Units of the checker's demand and capacity.
const (
	unitPlugin = "plugin-gpu"
	unitDRA    = "dra-gpu"
	unitMIG    = "mig-3g"
	unitCPU    = "milli-cpu"
)

// groupKind is how a group's nodes behave.
type groupKind int

const (
	healthy    groupKind = iota
	flaky                // node creates fail while the fault is on
	neverReady           // nodes register and never turn Ready
)

type group struct {
	name     string
	min, max int
	plugin   int64 // device-plugin GPUs in allocatable
	dra      int   // DRA devices published as slices
	mig      int   // partitionable GPUs (NVIDIA DynamicMIG slices)
	kind     groupKind
	priority int // priority expander: flaky and broken groups first
}

func groups() []group {
	return []group{
		{name: "plug-a", max: 4, plugin: 4, priority: 10},
		{name: "plug-b", max: 3, plugin: 8, priority: 10},
		{name: "plug-flaky", max: 4, plugin: 4, kind: flaky, priority: 30},
		{name: "dra-a", max: 4, dra: 8, priority: 10},
		{name: "dra-b", min: 1, max: 3, dra: 4, priority: 10},
		{name: "dra-never", max: 3, dra: 8, kind: neverReady, priority: 20},
		{name: "mig-a", max: 3, mig: 2, priority: 10},
	}
}

const nodeCPU = 32

// shape is what one kind of pod asks for.
type shape struct {
	name  string
	count int64
	claim bool // a ResourceClaimTemplate rather than an extended resource
	dra   bool
	mig   bool // partitions of a GPU, through a claim
}

func (s shape) String() string { return s.name + "-" + strconv.FormatInt(s.count, 10) }

func parseShape(v string) (shape, bool) {
	name, n, ok := strings.Cut(v, "-")
	if !ok {
		return shape{}, false
	}
	count, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return shape{}, false
	}
	switch name {
	case "plugin":
		return shape{name: name, count: count}, true
	case "draext":
		return shape{name: name, count: count, dra: true}, true
	case "claim":
		return shape{name: name, count: count, dra: true, claim: true}, true
	case "mig":
		return shape{name: name, count: count, claim: true, mig: true}, true
	case "cpu":
		return shape{name: name}, true
	}
	return shape{}, false
}

// demand is a pod's need in the checker's units: 100m CPU, and its GPUs.
func demand(p *v1.Pod) map[string]int64 {
	out := map[string]int64{unitCPU: 100}
	s, ok := parseShape(p.Annotations[shapeAnnotation])
	if !ok {
		// Not the soak's: ask for more than any node has, so it is never
		// held against the autoscaler.
		out[unitCPU] = 1 << 40
		return out
	}
	switch {
	case s.mig:
		out[unitMIG] = s.count
	case s.dra:
		out[unitDRA] = s.count
	case s.name == "plugin":
		out[unitPlugin] = s.count
	}
	return out
}

func capacity(name string, published bool) map[string]int64 {
	for _, g := range groups() {
		if g.name != name {
			continue
		}
		out := map[string]int64{unitCPU: nodeCPU * 1000, unitPlugin: g.plugin}
		if published {
			out[unitDRA] = int64(g.dra)
			out[unitMIG] = int64(g.mig * migPerGPU)
		}
		return out
	}
	return map[string]int64{}
}

// template is a group's node: CPU, device-plugin GPUs in allocatable,
// the soak label the pods select.
func (g group) template() *v1.Node {
	tmpl := fx.Node("template", nodeCPU, 128, nil)
	if g.plugin > 0 {
		tmpl = fx.Node("template", nodeCPU, 128, fx.GPUs(pluginResource, g.plugin))
	}
	tmpl.Name, tmpl.UID = "", ""
	tmpl.Labels = map[string]string{"soak": "true"}
	tmpl.Status.Conditions = nil
	return tmpl
}

// slices are what a group's node's DRA drivers publish.
func (g group) slices() []resourceapi.ResourceSliceSpec {
	var out []resourceapi.ResourceSliceSpec
	if g.dra > 0 {
		spec := fx.DeviceSlice("x", draDriver, g.dra, "gpu").Spec
		spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
		out = append(out, spec)
	}
	if g.mig > 0 {
		for _, sl := range fx.NVIDIADynamicMIG("x", g.mig) {
			spec := sl.Spec
			spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
			out = append(out, spec)
		}
	}
	return out
}

// nodeGroupObjects are the NodeGroup objects of the local provider.
func nodeGroupObjects(gs []group) []nodegroup.NodeGroup {
	var out []nodegroup.NodeGroup
	for _, g := range gs {
		ng := nodegroup.NodeGroup{TypeMeta: metav1.TypeMeta{APIVersion: nodegroup.APIVersion, Kind: nodegroup.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: g.name, Annotations: localGroupAnnotations(g)},
			Spec:       nodegroup.Spec{MinSize: g.min, MaxSize: g.max, Template: *g.template(), ResourceSlices: g.slices()}}
		out = append(out, ng)
	}
	return out
}

func writeNodeGroups(dir string, gs []group) (string, error) {
	var docs []string
	for _, ng := range nodeGroupObjects(gs) {
		data, err := yaml.Marshal(ng)
		if err != nil {
			return "", err
		}
		docs = append(docs, string(data))
	}
	path := filepath.Join(dir, "nodegroups.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600)
}

func writePriorities(dir string, gs []group) (string, error) {
	byPrio := map[int][]string{}
	for _, g := range gs {
		byPrio[g.priority] = append(byPrio[g.priority], "^"+g.name+"$")
	}
	var b strings.Builder
	for _, p := range []int{30, 20, 10} {
		fmt.Fprintf(&b, "%d:\n", p)
		for _, re := range byPrio[p] {
			fmt.Fprintf(&b, "- %s\n", re)
		}
	}
	path := filepath.Join(dir, "priorities.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// timings are the autoscaler's, short so that a few minutes hold many
// loops, provision timeouts and scale-downs.
type timings struct {
	scan, provision, readyDelay, slicesDelay, unneeded, backoff time.Duration
}

func soakTimings() timings {
	return timings{scan: time.Second, provision: 15 * time.Second, readyDelay: time.Second, slicesDelay: time.Second,
		unneeded: 5 * time.Second, backoff: 20 * time.Second}
}

func checkerConfig(tm timings, active []group) checker.Config {
	var gs []checker.Group
	for _, g := range active {
		gs = append(gs, checker.Group{Name: g.name, Min: g.min, Max: g.max, Faulty: g.kind != healthy})
	}
	return checker.Config{
		Groups: gs, GroupLabel: nodegroup.GroupLabel,
		AutoscalerUser: "system:serviceaccount:kube-system:draxr-autoscaler",
		Demand:         demand, Capacity: capacity,
		ScanInterval: tm.scan, ProvisionTimeout: tm.provision,
		// Ready and slices delays, the scheduler's retry of an
		// unschedulable pod (its backoff tops out at 10s) and a margin for
		// a machine shared by the control plane and two replicas.
		NodeStartup: tm.readyDelay + tm.slicesDelay + 10*time.Second + 5*time.Second,
		Settle:      2*tm.scan + 3*time.Second,
		// A new leader syncs its informers and clears its predecessor's
		// taints before its first loop.
		RestartGrace: 30 * time.Second,
		StartupGrace: 30 * time.Second,
		// The soak's informers back off up to several seconds while the
		// API server is away.
		Resync:             20 * time.Second,
		LeaderActiveWithin: 5 * tm.scan,
	}
}

// localGroupAnnotations give a local provider's group its behaviour: nodes
// that never turn Ready.
func localGroupAnnotations(g group) map[string]string {
	if g.kind == neverReady {
		return map[string]string{local.NodeReadyDelayAnnotation: "never"}
	}
	return nil
}
