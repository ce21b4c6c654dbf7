package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

const gpuSlices = `[{"driver":"gpu.example.com","devices":[{"name":"gpu-0"},{"name":"gpu-1"},{"name":"gpu-2"},{"name":"gpu-3"},{"name":"gpu-4"},{"name":"gpu-5"},{"name":"gpu-6"},{"name":"gpu-7"}]}]`

func scalable(kind, ns, name string, replicas int64, ann map[string]string, labels map[string]string, owner string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capi.APIVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"replicas": replicas, "clusterName": "c1"},
	}}
	u.SetAnnotations(ann)
	u.SetLabels(labels)
	if owner != "" {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: capi.APIVersion, Kind: capi.MachineDeployment, Name: owner, UID: "x"}})
	}
	return u
}

func machine(ns, name, ownerKind, owner, providerID, phase string, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capi.APIVersion, "kind": capi.Machine,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"clusterName": "c1"},
		"status":   map[string]any{"phase": phase},
	}}
	if providerID != "" {
		_ = unstructured.SetNestedField(u.Object, providerID, "spec", "providerID")
	}
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: capi.APIVersion, Kind: ownerKind, Name: owner, UID: "y"}})
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	return u
}

func node(name, providerID string, ready bool) *v1.Node {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "gpu", v1.LabelHostname: name}},
		Spec: v1.NodeSpec{ProviderID: providerID},
		Status: v1.NodeStatus{Capacity: v1.ResourceList{"cpu": *resourceQ("16")}, Allocatable: v1.ResourceList{"cpu": *resourceQ("16")},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status}}}}
}

func bounds(minSize, maxSize int, more ...string) map[string]string {
	a := map[string]string{capi.MinSizeAnnotation: fmt.Sprint(minSize), capi.MaxSizeAnnotation: fmt.Sprint(maxSize),
		capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi"}
	for i := 0; i+1 < len(more); i += 2 {
		a[more[i]] = more[i+1]
	}
	return a
}

// fakeCluster is a fake dynamic client whose scale subresource reads and
// writes spec.replicas with resourceVersion checks, as the API server's.
type fakeCluster struct {
	dyn        *dynamicfake.FakeDynamicClient
	kube       *kubefake.Clientset
	conflicts  int // scale updates to refuse with a conflict first
	scaleCalls int
}

func newFake(t *testing.T, objs []runtime.Object, kubeObjs ...runtime.Object) *fakeCluster {
	t.Helper()
	lists := map[schema.GroupVersionResource]string{}
	for _, k := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool, capi.Machine} {
		lists[GVR(k)] = k + "List"
	}
	for _, version := range []string{"v1beta1", "v1beta2"} { // the tests' infrastructure templates, watched
		lists[schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: version, Resource: "foomachinetemplates"}] = "FooMachineTemplateList"
	}
	f := &fakeCluster{dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...),
		kube: kubefake.NewClientset(kubeObjs...)}
	tracker := f.dyn.Tracker()
	f.dyn.PrependReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		ga := a.(clienttesting.GetAction)
		obj, err := tracker.Get(a.GetResource(), a.GetNamespace(), ga.GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured)
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return true, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "resourceVersion": u.GetResourceVersion()},
			"spec":     map[string]any{"replicas": replicas},
		}}, nil
	})
	f.dyn.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		f.scaleCalls++
		s := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		if f.conflicts > 0 {
			f.conflicts--
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), s.GetName(), fmt.Errorf("the object has been modified"))
		}
		obj, err := tracker.Get(a.GetResource(), a.GetNamespace(), s.GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		replicas, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
		_ = unstructured.SetNestedField(u.Object, replicas, "spec", "replicas")
		return true, s, tracker.Update(a.GetResource(), u, a.GetNamespace())
	})
	return f
}

func (f *fakeCluster) provider(t *testing.T, discovery ...string) *Provider {
	t.Helper()
	p, err := New(Options{Dynamic: f.dyn, Kube: f.kube, AutoDiscovery: discovery,
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fakeCluster) replicas(t *testing.T, kind, ns, name string) int64 {
	t.Helper()
	u, err := f.dyn.Resource(GVR(kind)).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return r
}

func (f *fakeCluster) deleteMark(t *testing.T, ns, name string) string {
	t.Helper()
	u, err := f.dyn.Resource(GVR(capi.Machine)).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()[capi.DeleteMachineAnnotation]
}

func ids(groups []cloudprovider.NodeGroup) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Id())
	}
	sort.Strings(out)
	return out
}

func TestDiscovery(t *testing.T) {
	objs := []runtime.Object{
		scalable(capi.MachineDeployment, "ns1", "gpu", 0, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), map[string]string{"tier": "gpu"}, ""),
		scalable(capi.MachineSet, "ns1", "gpu-abc", 0, bounds(0, 5), nil, "gpu"), // owned by the MD: not a group
		scalable(capi.MachineSet, "ns1", "standalone", 1, bounds(1, 3), nil, ""),
		scalable(capi.MachinePool, "ns2", "pool", 0, bounds(0, 4), map[string]string{"tier": "gpu"}, ""),
		scalable(capi.MachineDeployment, "ns1", "bad", 0, bounds(0, 5, capi.MaxSizeAnnotation, "five"), nil, ""),
		scalable(capi.MachineDeployment, "ns1", "bad-slices", 0, bounds(0, 5, capi.TemplateSlicesAnnotation, "- nodriver: x"), nil, ""),
		scalable(capi.MachineDeployment, "ns1", "unannotated", 1, nil, nil, ""),
		scalable(capi.MachineDeployment, "ns1", "fixed", 0, bounds(0, 0), nil, ""),
	}
	tests := []struct {
		name      string
		discovery []string
		want      []string
		wantErrs  map[string]string
	}{
		{
			name: "every annotated group; bad annotations recorded per object",
			want: []string{"MachineDeployment/ns1/gpu", "MachinePool/ns2/pool", "MachineSet/ns1/standalone"},
			wantErrs: map[string]string{
				"MachineDeployment/ns1/bad":        "MachineDeployment ns1/bad: annotation " + capi.MaxSizeAnnotation + `: "five" is not an integer`,
				"MachineDeployment/ns1/bad-slices": "MachineDeployment ns1/bad-slices: annotation " + capi.TemplateSlicesAnnotation + `: not a list of ResourceSliceSpecs: unknown field "nodriver"`,
			},
		},
		{name: "namespace", discovery: []string{"clusterapi:namespace=ns2"}, want: []string{"MachinePool/ns2/pool"}},
		{name: "label selector", discovery: []string{"clusterapi:tier=gpu"}, want: []string{"MachineDeployment/ns1/gpu", "MachinePool/ns2/pool"}},
		{name: "clusterName", discovery: []string{"clusterapi:clusterName=other"}, want: nil},
		// As CA, only the first namespace a spec names is watched, so the
		// first spec cannot reach the pool in ns2.
		{name: "two specs", discovery: []string{"clusterapi:clusterName=c1,tier=gpu", "clusterapi:namespace=ns1,clusterName=c1"},
			want: []string{"MachineDeployment/ns1/gpu", "MachineSet/ns1/standalone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, objs).provider(t, tc.discovery...)
			if got := ids(p.NodeGroups()); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("groups = %v, want %v", got, tc.want)
			}
			if tc.wantErrs != nil {
				errs := p.GroupErrors()
				if len(errs) != len(tc.wantErrs) {
					t.Errorf("errors = %v, want %d", errs, len(tc.wantErrs))
				}
				for id, want := range tc.wantErrs {
					if err := errs[id]; err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("error for %s = %v, want %q", id, err, want)
					}
					// Events about the error go to that very object.
					kind, rest, _ := strings.Cut(id, "/")
					namespace, name, _ := strings.Cut(rest, "/")
					if ref := p.GroupErrorObject(id); ref == nil || ref.Kind != kind || ref.Namespace != namespace || ref.Name != name || ref.APIVersion != capi.APIVersion {
						t.Errorf("object of %s = %+v, want %s %s/%s (%s)", id, ref, kind, namespace, name, capi.APIVersion)
					}
				}
			}
		})
	}
}

func TestParseAutoDiscovery(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr string
		check   func(Discovery) bool
	}{
		{spec: "clusterapi:namespace=a,clusterName=b", check: func(d Discovery) bool { return d.Namespace == "a" && d.ClusterName == "b" && d.Selector.Empty() }},
		{spec: "clusterapi:", check: func(d Discovery) bool { return d.Namespace == "" && d.Selector.Empty() }},
		{spec: "clusterapi:,namespace=a,", check: func(d Discovery) bool { return d.Namespace == "a" }},
		{spec: "clusterapi:color=green,shape=square", check: func(d Discovery) bool { return d.Selector.String() == "color=green,shape=square" }},
		{spec: "clusterapi", wantErr: "should be discoverer:key=value,key=value"},
		{spec: "clusterapi:a:b", wantErr: "should be discoverer:key=value,key=value"},
		{spec: "asg:tag=x", wantErr: `unsupported discoverer "asg"`},
		{spec: "clusterapi:namespace", wantErr: `invalid key=value pair "namespace"`},
		{spec: "clusterapi:a=b=c", wantErr: `invalid key=value pair "a=b=c"`},
		{spec: "clusterapi:bad key=v", wantErr: "label selector"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseAutoDiscovery([]string{tc.spec})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != 1 || !tc.check(got[0]) {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestIncreaseSize(t *testing.T) {
	tests := []struct {
		name      string
		replicas  int64
		delta     int
		conflicts int
		want      int64
		wantErr   string
	}{
		{name: "from zero", replicas: 0, delta: 3, want: 3},
		{name: "retries a conflict", replicas: 1, delta: 2, conflicts: 2, want: 3},
		{name: "to max", replicas: 2, delta: 3, want: 5},
		{name: "beyond max", replicas: 2, delta: 4, want: 2, wantErr: "2 + 4 nodes exceeds max size 5"},
		{name: "not positive", replicas: 2, delta: 0, want: 2, wantErr: "must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, []runtime.Object{scalable(capi.MachineDeployment, "ns", "md", tc.replicas, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, "")})
			p := f.provider(t)
			f.conflicts = tc.conflicts
			err := p.NodeGroups()[0].IncreaseSize(context.Background(), tc.delta)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := f.replicas(t, capi.MachineDeployment, "ns", "md"); got != tc.want {
				t.Errorf("replicas = %d, want %d", got, tc.want)
			}
		})
	}
}

// DecreaseTargetSize takes a negative delta, as the NodeGroup contract
// and the cluster state registry (undoing a timed-out scale-up) pass it,
// and gives up only machines without a node.
func TestDecreaseTargetSize(t *testing.T) {
	tests := []struct {
		name    string
		delta   int
		want    int64
		wantErr string
	}{
		{name: "gives up the two unregistered machines", delta: -2, want: 1},
		{name: "gives up one", delta: -1, want: 2},
		{name: "would remove the registered node", delta: -3, want: 3, wantErr: "would remove registered nodes (1); use DeleteNodes"},
		{name: "positive delta is refused", delta: 2, want: 3, wantErr: "size decrease must be negative, got 2"},
		{name: "zero is refused", delta: 0, want: 3, wantErr: "must be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, []runtime.Object{
				scalable(capi.MachineSet, "ns", "ms", 3, bounds(0, 5), nil, ""),
				machine("ns", "up", capi.MachineSet, "ms", "test:///n1", "Running", false),
				machine("ns", "new-1", capi.MachineSet, "ms", "", "Provisioning", false),
				machine("ns", "new-2", capi.MachineSet, "ms", "", "Provisioning", false),
			}, node("n1", "test:///n1", true))
			p := f.provider(t)
			err := p.NodeGroups()[0].DecreaseTargetSize(context.Background(), tc.delta)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := f.replicas(t, capi.MachineSet, "ns", "ms"); got != tc.want {
				t.Errorf("replicas = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDeleteNodes(t *testing.T) {
	objs := func(replicas int64, minSize int) []runtime.Object {
		return []runtime.Object{
			scalable(capi.MachineDeployment, "ns", "md", replicas, bounds(minSize, 5), nil, ""),
			scalable(capi.MachineSet, "ns", "md-1", replicas, nil, nil, "md"),
			machine("ns", "m1", capi.MachineSet, "md-1", "test:///n1", "Running", false),
			machine("ns", "m2", capi.MachineSet, "md-1", "test:///n2", "Running", false),
			machine("ns", "m3", capi.MachineSet, "md-1", "test:///n3", "Running", false),
			scalable(capi.MachineSet, "ns", "other", 1, bounds(0, 3), nil, ""),
			machine("ns", "o1", capi.MachineSet, "other", "test:///o1", "Running", false),
		}
	}
	kube := []runtime.Object{node("n1", "test:///n1", true), node("n2", "test:///n2", true), node("n3", "test:///n3", true), node("o1", "test:///o1", true)}
	tests := []struct {
		name         string
		minSize      int
		delete       []string
		conflicts    int
		wantErr      string
		wantReplicas int64
		wantMarked   []string
	}{
		{name: "marks the chosen machines and lowers replicas", delete: []string{"n1", "n3"}, wantReplicas: 1, wantMarked: []string{"m1", "m3"}},
		{name: "retries a conflict on scale", delete: []string{"n2"}, conflicts: 1, wantReplicas: 2, wantMarked: []string{"m2"}},
		{name: "never below min: nothing marked", minSize: 2, delete: []string{"n1", "n2"}, wantErr: "deleting 2 of 3 nodes goes below min size 2", wantReplicas: 3},
		{name: "a node of another group", delete: []string{"o1"}, wantErr: "node o1 (providerID \"test:///o1\") is not one of its machines", wantReplicas: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, objs(3, tc.minSize), kube...)
			p := f.provider(t)
			var md cloudprovider.NodeGroup
			for _, g := range p.NodeGroups() {
				if g.Id() == "MachineDeployment/ns/md" {
					md = g
				}
			}
			if md == nil {
				t.Fatalf("no MachineDeployment group in %v (errors %v)", ids(p.NodeGroups()), p.GroupErrors())
			}
			var nodes []*v1.Node
			for _, n := range tc.delete {
				nodes = append(nodes, node(n, "test:///"+n, true))
			}
			f.conflicts = tc.conflicts
			err := md.DeleteNodes(context.Background(), nodes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := f.replicas(t, capi.MachineDeployment, "ns", "md"); got != tc.wantReplicas {
				t.Errorf("replicas = %d, want %d", got, tc.wantReplicas)
			}
			var marked []string
			for _, m := range []string{"m1", "m2", "m3"} {
				if v := f.deleteMark(t, "ns", m); v != "" {
					marked = append(marked, m)
				}
			}
			if strings.Join(marked, ",") != strings.Join(tc.wantMarked, ",") {
				t.Errorf("marked = %v, want %v", marked, tc.wantMarked)
			}
		})
	}
}

// When lowering replicas fails, the marks are removed again.
func TestDeleteNodesUnmarksOnFailure(t *testing.T) {
	f := newFake(t, []runtime.Object{
		scalable(capi.MachineSet, "ns", "ms", 2, bounds(0, 5), nil, ""),
		machine("ns", "m1", capi.MachineSet, "ms", "test:///n1", "Running", false),
	}, node("n1", "test:///n1", true))
	p := f.provider(t)
	f.dyn.PrependReactor("update", "machinesets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "scale" {
			return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "ms", fmt.Errorf("no"))
		}
		return false, nil, nil
	})
	err := p.NodeGroups()[0].DeleteNodes(context.Background(), []*v1.Node{node("n1", "test:///n1", true)})
	if err == nil || !strings.Contains(err.Error(), "set replicas to 1") {
		t.Fatalf("error = %v", err)
	}
	if v := f.deleteMark(t, "ns", "m1"); v != "" {
		t.Errorf("m1 still marked %q", v)
	}
}

// A removal decided on a stale view of replicas (the loop's cache still
// says 3 after an earlier removal made it 2) fails before any Machine is
// marked: a mark would make that machine CAPI's first pick until undone.
func TestDeleteNodesChecksFreshReplicasBeforeMarking(t *testing.T) {
	f := newFake(t, []runtime.Object{
		scalable(capi.MachineSet, "ns", "ms", 3, bounds(1, 5), nil, ""),
		machine("ns", "m1", capi.MachineSet, "ms", "test:///n1", "Running", false),
		machine("ns", "m2", capi.MachineSet, "ms", "test:///n2", "Running", false),
		machine("ns", "m3", capi.MachineSet, "ms", "test:///n3", "Running", false),
	}, node("n1", "test:///n1", true), node("n2", "test:///n2", true), node("n3", "test:///n3", true))
	p := f.provider(t)
	ms := f.dyn.Resource(GVR(capi.MachineSet)).Namespace("ns")
	u, err := ms.Get(context.Background(), "ms", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var marks []string
	f.dyn.PrependReactor("update", "machines", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured); ok && obj.GetAnnotations()[capi.DeleteMachineAnnotation] != "" {
			marks = append(marks, obj.GetName())
		}
		return false, nil, nil
	})
	err = p.NodeGroups()[0].DeleteNodes(context.Background(), []*v1.Node{node("n1", "test:///n1", true), node("n3", "test:///n3", true)})
	if err == nil || !strings.Contains(err.Error(), "deleting 2 of 2 nodes goes below min size 1") {
		t.Fatalf("error = %v, want the fresh replicas (2) named", err)
	}
	if len(marks) != 0 {
		t.Errorf("machines marked %v on a stale view", marks)
	}
	if got := f.replicas(t, capi.MachineSet, "ns", "ms"); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
}

func TestNodesAndStates(t *testing.T) {
	f := newFake(t, []runtime.Object{
		scalable(capi.MachineSet, "ns", "ms", 4, bounds(0, 5), nil, ""),
		machine("ns", "running", capi.MachineSet, "ms", "test:///n1", "Running", false),
		machine("ns", "new", capi.MachineSet, "ms", "", "Provisioning", false),
		machine("ns", "broken", capi.MachineSet, "ms", "test:///n9", "Failed", false),
		machine("ns", "going", capi.MachineSet, "ms", "test:///n2", "Running", true),
	}, node("n1", "test:///n1", true), node("n2", "test:///n2", true))
	p := f.provider(t)
	g := p.NodeGroups()[0].(*group)
	got := map[string]string{}
	for _, in := range g.Machines() {
		status := in.Status.State.String()
		if e := in.Status.ErrorInfo; e != nil {
			status += " error=" + e.ErrorCode + ":" + e.ErrorMessage
		}
		got[in.Machine] = fmt.Sprintf("%s %s node=%s instance=%s", in.State, in.ProviderID, in.NodeName, status)
	}
	want := map[string]string{
		"ns/running": "Running test:///n1 node=n1 instance=Running",
		"ns/new":     "Provisioning clusterapi://ns/new node= instance=Creating",
		"ns/broken":  "Failed test:///n9 node= instance=Creating error=ProvisioningFailed:machine failed",
		"ns/going":   "Deleting test:///n2 node=n2 instance=Deleting",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if n, _ := p.NodeGroupForNode(node("n1", "test:///n1", true)); n == nil || n.Id() != "MachineSet/ns/ms" {
		t.Errorf("n1 maps to %v", n)
	}
	if n, _ := p.NodeGroupForNode(node("x", "test:///x", true)); n != nil {
		t.Errorf("unknown node maps to %s", n.Id())
	}
	if target, _ := g.TargetSize(); target != 4 {
		t.Errorf("target = %d", target)
	}
}

func TestTemplateNodeInfo(t *testing.T) {
	liveSlice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpu"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "live-0"}, {Name: "live-1"}}}}
	otherSlice := liveSlice.DeepCopy()
	otherSlice.Name, otherSlice.Spec.NodeName = "x-gpu", ptr.To("x")
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns"}, Data: map[string]string{capi.TemplateSlicesKey: gpuSlices}}
	type templateCase struct {
		name        string
		objs        []runtime.Object
		kube        []runtime.Object
		wantDevices int
		wantCPU     string
		wantErr     string
	}
	tests := []templateCase{
		{name: "from the annotation at zero", objs: []runtime.Object{scalable(capi.MachineSet, "ns", "ms", 0, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, "")},
			wantDevices: 8, wantCPU: "8"},
		{name: "from a ConfigMap", objs: []runtime.Object{scalable(capi.MachineSet, "ns", "ms", 0, bounds(0, 5, capi.TemplateSlicesConfigMapAnnotation, "tpl"), nil, "")},
			kube: []runtime.Object{cm}, wantDevices: 8, wantCPU: "8"},
		{name: "missing ConfigMap is an error on that group", objs: []runtime.Object{scalable(capi.MachineSet, "ns", "ms", 0, bounds(0, 5, capi.TemplateSlicesConfigMapAnnotation, "gone"), nil, "")},
			wantErr: "MachineSet ns/ms: annotation " + capi.TemplateSlicesConfigMapAnnotation + ": ConfigMap ns/gone"},
		{name: "a ready node's node and slices", objs: []runtime.Object{
			scalable(capi.MachineSet, "ns", "ms", 1, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, ""),
			machine("ns", "m1", capi.MachineSet, "ms", "test:///n1", "Running", false)},
			kube: []runtime.Object{node("n1", "test:///n1", true), liveSlice, otherSlice}, wantDevices: 2, wantCPU: "16"},
		{name: "a node not ready is not copied", objs: []runtime.Object{
			scalable(capi.MachineSet, "ns", "ms", 1, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, ""),
			machine("ns", "m1", capi.MachineSet, "ms", "test:///n1", "Running", false)},
			kube: []runtime.Object{node("n1", "test:///n1", false), liveSlice}, wantDevices: 8, wantCPU: "8"},
	}
	// Ready, but not what a new node will look like, as CA chooses.
	for _, c := range []struct {
		why    string
		change func(*v1.Node)
	}{
		{"still has the not-ready taint", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}}
		}},
		{"has a startup taint", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "startup-taint.cluster-autoscaler.kubernetes.io/gpu", Effect: v1.TaintEffectNoSchedule}}
		}},
		{"is cordoned", func(n *v1.Node) { n.Spec.Unschedulable = true }},
		{"is being removed", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}
		}},
	} {
		n := node("n1", "test:///n1", true)
		c.change(n)
		tests = append(tests, templateCase{name: "a ready node that " + c.why + " is not copied", objs: []runtime.Object{
			scalable(capi.MachineSet, "ns", "ms", 1, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, ""),
			machine("ns", "m1", capi.MachineSet, "ms", "test:///n1", "Running", false)},
			kube: []runtime.Object{n, liveSlice}, wantDevices: 8, wantCPU: "8"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, tc.objs, tc.kube...).provider(t)
			if tc.wantErr != "" {
				if err := p.GroupErrors()["MachineSet/ns/ms"]; err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				if len(p.NodeGroups()) != 0 {
					t.Fatal("a group with a bad template must not be offered")
				}
				return
			}
			groups := p.NodeGroups()
			if len(groups) != 1 {
				t.Fatalf("groups %v, errors %v", ids(groups), p.GroupErrors())
			}
			n, slices, err := groups[0].TemplateNodeInfo()
			if err != nil {
				t.Fatal(err)
			}
			devices := 0
			for _, s := range slices {
				devices += len(s.Spec.Devices)
				if *s.Spec.NodeName != n.Name || s.Spec.Pool.Name != n.Name || s.Spec.Pool.ResourceSliceCount != 1 {
					t.Errorf("slice %s: nodeName %s pool %+v, node %s", s.Name, *s.Spec.NodeName, s.Spec.Pool, n.Name)
				}
			}
			if devices != tc.wantDevices {
				t.Errorf("devices = %d, want %d", devices, tc.wantDevices)
			}
			if cpu := n.Status.Allocatable["cpu"]; cpu.String() != tc.wantCPU {
				t.Errorf("cpu = %s, want %s", cpu.String(), tc.wantCPU)
			}
			if n.Labels[v1.LabelHostname] != n.Name {
				t.Errorf("hostname label %q for node %s", n.Labels[v1.LabelHostname], n.Name)
			}
		})
	}
}

func resourceQ(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// GetOptions is the flags with the group's autoscaling-options-*
// annotations; a group without them runs with the flags.
func TestGetOptions(t *testing.T) {
	f := newFake(t, []runtime.Object{
		scalable(capi.MachineDeployment, "ns", "tuned", 1, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices,
			nodegroup.AutoscalingOptionsPrefix+nodegroup.OptScaleDownUnneededTime, "1m",
			nodegroup.AutoscalingOptionsPrefix+nodegroup.OptScaleDownGpuUtilizationThreshold, "0.25",
			nodegroup.AutoscalingOptionsPrefix+nodegroup.OptMaxNodeProvisionTime, "3m"), nil, ""),
		scalable(capi.MachineDeployment, "ns", "plain", 1, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, ""),
	})
	p := f.provider(t)
	defaults := cloudprovider.NodeGroupOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5,
		ScaleDownUnneededTime: 10 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute,
		MaxNodeProvisionTime: 15 * time.Minute, MaxNodeStartupTime: 15 * time.Minute}
	got := map[string]cloudprovider.NodeGroupOptions{}
	for _, g := range p.NodeGroups() {
		o, err := cloudprovider.OptionsOf(g, defaults)
		if err != nil {
			t.Fatal(err)
		}
		got[g.Id()] = o
	}
	tuned := defaults
	tuned.ScaleDownUnneededTime, tuned.ScaleDownGpuUtilizationThreshold, tuned.MaxNodeProvisionTime = time.Minute, 0.25, 3*time.Minute
	if o := got["MachineDeployment/ns/tuned"]; o != tuned {
		t.Errorf("tuned group options %+v, want %+v", o, tuned)
	}
	if o := got["MachineDeployment/ns/plain"]; o != defaults {
		t.Errorf("plain group options %+v, want the flags %+v", o, defaults)
	}
}

// A MachineDeployment at zero without capacity annotations scales from
// zero on its infrastructure template's status.capacity; one whose
// template cannot be read is left out, as CA leaves it.
func TestInfraTemplateCapacity(t *testing.T) {
	withRef := func(name, template string) *unstructured.Unstructured { return withInfraRef("ns", name, 0, template) }
	tmpl := fooTemplate("ns", "big")
	f := newFake(t, []runtime.Object{withRef("from-template", "big"), withRef("missing-template", "gone"), tmpl})
	gv := schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	mapper.Add(gv.WithKind("FooMachineTemplate"), meta.RESTScopeNamespace)
	p, err := New(Options{Dynamic: f.dyn, Kube: f.kube, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	groups := p.NodeGroups()
	if got := ids(groups); strings.Join(got, ",") != "MachineDeployment/ns/from-template" {
		t.Fatalf("groups %v, want only the one whose template has status.capacity", got)
	}
	node, _, err := groups[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if node.Status.Capacity.Cpu().Value() != 32 || node.Status.Capacity.Memory().Cmp(resource.MustParse("128Gi")) != 0 {
		t.Errorf("template node capacity %v, want the template's 32 cpu and 128Gi", node.Status.Capacity)
	}
}

// A MachinePool whose provider keeps no Machine objects: its instances are
// spec.providerIDList, its nodes map to it by providerID, and removing a
// chosen node is refused (lowering replicas would let the provider pick
// another instance), replicas untouched.
func TestMachinePoolProviderIDList(t *testing.T) {
	pool := scalable(capi.MachinePool, "ns", "mp", 2, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, "")
	_ = unstructured.SetNestedStringSlice(pool.Object, []string{"cloud:///b", "cloud:///a"}, "spec", "providerIDList")
	f := newFake(t, []runtime.Object{pool}, node("node-a", "cloud:///a", true))
	p := f.provider(t)
	if len(p.NodeGroups()) != 1 {
		t.Fatalf("groups %v, want the MachinePool", ids(p.NodeGroups()))
	}
	g := p.NodeGroups()[0]
	instances, err := g.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range instances {
		got = append(got, fmt.Sprintf("%s %s %d", in.ProviderID, in.NodeName, in.Status.State))
	}
	want := []string{fmt.Sprintf("cloud:///a node-a %d", cloudprovider.InstanceRunning), fmt.Sprintf("cloud:///b  %d", cloudprovider.InstanceCreating)}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("instances %q, want %q", got, want)
	}
	n := node("node-a", "cloud:///a", true)
	if owner, err := p.NodeGroupForNode(n); err != nil || owner == nil || owner.Id() != g.Id() {
		t.Fatalf("NodeGroupForNode(node-a) = %v, %v; want the MachinePool", owner, err)
	}
	if err := g.DeleteNodes(context.Background(), []*v1.Node{n}); err == nil || !strings.Contains(err.Error(), "has no Machine") {
		t.Errorf("DeleteNodes = %v, want a refusal naming the missing Machine", err)
	}
	if r := f.replicas(t, capi.MachinePool, "ns", "mp"); r != 2 {
		t.Errorf("replicas = %d after a refused removal, want 2", r)
	}
}

// TestTemplateCopiedAsCAChooses follows one group through the loops CA's
// node info provider distinguishes: a node Ready for under a minute is
// not copied while the annotations describe the group; a copied template
// outlives its node (unready, then gone at zero replicas) until
// --node-info-cache-expire-time; and a group with no description and only
// a new node still gets that node's template rather than no group.
func TestTemplateCopiedAsCAChooses(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	liveSlice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpu"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "live-0"}, {Name: "live-1"}}}}
	readySince := func(since time.Time) *v1.Node {
		n := node("n1", "test:///n1", true)
		n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since)
		return n
	}
	onlyBounds := map[string]string{capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "5"}
	type loop struct {
		at     time.Duration // after start
		change func(t *testing.T, f *fakeCluster)
		// want is the template ("2 devices, 16 CPUs"), "no group", or ""
		// for a step that only changes the cluster.
		want string
	}
	setNode := func(n *v1.Node) func(*testing.T, *fakeCluster) {
		return func(t *testing.T, f *fakeCluster) {
			if _, err := f.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	removeNode := func(t *testing.T, f *fakeCluster) {
		ctx := context.Background()
		if err := f.kube.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.kube.ResourceV1().ResourceSlices().Delete(ctx, "n1-gpu", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.dyn.Resource(GVR(capi.Machine)).Namespace("ns").Delete(ctx, "m1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		u, err := f.dyn.Resource(GVR(capi.MachineSet)).Namespace("ns").Get(ctx, "ms", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicas")
		if _, err := f.dyn.Resource(GVR(capi.MachineSet)).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		annotations map[string]string
		nodeReady   time.Duration // Ready since, relative to start
		loops       []loop
	}{
		{name: "a node Ready under a minute waits; the annotations serve", annotations: bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices),
			nodeReady: -30 * time.Second, loops: []loop{
				{at: 0, want: "8 devices, 8 CPUs"},
				{at: 29 * time.Second, want: "8 devices, 8 CPUs"},
				{at: 31 * time.Second, want: "2 devices, 16 CPUs"},
			}},
		{name: "the copy outlives its node until it expires", annotations: onlyBounds, nodeReady: -time.Hour, loops: []loop{
			{at: 0, want: "2 devices, 16 CPUs"},
			{at: time.Minute, change: setNode(node("n1", "test:///n1", false)), want: "2 devices, 16 CPUs"},
			{at: 2 * time.Minute, change: removeNode, want: "2 devices, 16 CPUs"},
			{at: 2 * time.Hour, want: "no group"},
		}},
		{name: "a fresh copy replaces the cached one", annotations: onlyBounds, nodeReady: -time.Hour, loops: []loop{
			{at: 0, want: "2 devices, 16 CPUs"},
			{at: 30 * time.Minute, change: setNode(node("n1", "test:///n1", false))},
			{at: 50 * time.Minute, change: setNode(readySince(start.Add(30 * time.Minute)))},
			// Copied again at 50 minutes, so 50 minutes old here; the first
			// copy would be 100 minutes old, past the hour.
			{at: 100 * time.Minute, change: removeNode, want: "2 devices, 16 CPUs"},
		}},
		{name: "no description and only a new node: that node, not no group", annotations: onlyBounds, nodeReady: -10 * time.Second, loops: []loop{
			{at: 0, want: "2 devices, 16 CPUs"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, []runtime.Object{
				scalable(capi.MachineSet, "ns", "ms", 1, tc.annotations, nil, ""),
				machine("ns", "m1", capi.MachineSet, "ms", "test:///n1", "Running", false)},
				readySince(start.Add(tc.nodeReady)), liveSlice)
			now := start
			p, err := New(Options{Dynamic: f.dyn, Kube: f.kube, Now: func() time.Time { return now }, TemplateCacheExpiry: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.loops {
				now = start.Add(l.at)
				if l.change != nil {
					l.change(t, f)
				}
				if err := p.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
				if l.want == "" {
					continue
				}
				if got := template(t, p); got != l.want {
					t.Errorf("at %v: template %s, want %s", l.at, got, l.want)
				}
			}
		})
	}
}

// template describes the provider's only group's template.
func template(t *testing.T, p *Provider) string {
	t.Helper()
	groups := p.NodeGroups()
	switch {
	case len(groups) == 0 && len(p.GroupErrors()) == 0:
		return "no group"
	case len(groups) != 1:
		return fmt.Sprintf("groups %v, errors %v", ids(groups), p.GroupErrors())
	}
	n, slices, err := groups[0].TemplateNodeInfo()
	if err != nil {
		return err.Error()
	}
	devices := 0
	for _, s := range slices {
		devices += len(s.Spec.Devices)
	}
	cpu := n.Status.Allocatable["cpu"]
	return fmt.Sprintf("%d devices, %s CPUs", devices, cpu.String())
}

// A management cluster of Cluster API 1.10 or older serves only v1beta1:
// the provider reads and scales its objects there, v1beta1 shapes and
// all (an infrastructureRef with apiVersion, a Machine's nodeRef).
func TestServedV1beta1Only(t *testing.T) {
	v1beta1 := schema.GroupVersion{Group: capi.Group, Version: "v1beta1"}
	asV1beta1 := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetAPIVersion(v1beta1.String())
		return u
	}
	md := asV1beta1(scalable(capi.MachineDeployment, "ns", "gpu", 1, map[string]string{capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "4"}, nil, ""))
	_ = unstructured.SetNestedStringMap(md.Object, map[string]string{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
		"kind": "FooMachineTemplate", "name": "big", "namespace": "ns"}, "spec", "template", "spec", "infrastructureRef")
	ms := asV1beta1(scalable(capi.MachineSet, "ns", "gpu-abc", 1, nil, nil, "gpu"))
	m := asV1beta1(machine("ns", "gpu-abc-1", capi.MachineSet, "gpu-abc", "fake:///gpu-0", "Running", false))
	_ = unstructured.SetNestedStringMap(m.Object, map[string]string{"apiVersion": "v1", "kind": "Node", "name": "gpu-0"}, "status", "nodeRef")
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FooMachineTemplate",
		"metadata": map[string]any{"name": "big", "namespace": "ns"},
		"status":   map[string]any{"capacity": map[string]any{"cpu": "32", "memory": "128Gi"}},
	}}
	lists := map[schema.GroupVersionResource]string{}
	infraGV := schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{infraGV})
	for _, k := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool, capi.Machine} {
		lists[v1beta1.WithResource(strings.ToLower(k)+"s")] = k + "List"
		lists[GVR(k)] = k + "List"
	}
	for _, version := range []string{"v1beta1", "v1beta2"} { // the tests' infrastructure templates, watched
		lists[schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: version, Resource: "foomachinetemplates"}] = "FooMachineTemplateList"
	}
	mapper.Add(infraGV.WithKind("FooMachineTemplate"), meta.RESTScopeNamespace)
	f := &fakeCluster{dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, md, ms, m, tmpl),
		// The node not listed: the template comes from the infrastructure
		// template, not a copy of the member.
		kube: kubefake.NewClientset()}
	// Not served at v1beta2, as an API server without the version says.
	f.dyn.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if gvr := a.GetResource(); gvr.Group == capi.Group && gvr.Version == capi.Version {
			return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
		}
		return false, nil, nil
	})
	f.dyn.PrependReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		obj, err := f.dyn.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(clienttesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured)
		r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return true, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "resourceVersion": u.GetResourceVersion()},
			"spec":     map[string]any{"replicas": r}}}, nil
	})
	f.dyn.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		obj, err := f.dyn.Tracker().Get(a.GetResource(), a.GetNamespace(), s.GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		r, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
		_ = unstructured.SetNestedField(u.Object, r, "spec", "replicas")
		return true, s, f.dyn.Tracker().Update(a.GetResource(), u, a.GetNamespace())
	})
	p, err := New(Options{Dynamic: f.dyn, Kube: f.kube, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	groups := p.NodeGroups()
	if got := ids(groups); strings.Join(got, ",") != "MachineDeployment/ns/gpu" {
		t.Fatalf("groups %v (errors %v), want the v1beta1 MachineDeployment", got, p.errs)
	}
	g, err := p.NodeGroupForNode(node("gpu-0", "fake:///gpu-0", false))
	if err != nil || g == nil || g.Id() != "MachineDeployment/ns/gpu" {
		t.Errorf("the v1beta1 Machine's node: group %v, %v", g, err)
	}
	tn, _, err := groups[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if tn.Status.Capacity.Cpu().Value() != 32 {
		t.Errorf("template from the v1beta1 infrastructureRef: cpu %v, want 32", tn.Status.Capacity.Cpu())
	}
	if err := groups[0].IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	u, err := f.dyn.Resource(v1beta1.WithResource("machinedeployments")).Namespace("ns").Get(ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != 3 {
		t.Errorf("v1beta1 MachineDeployment replicas %d after +2, want 3", r)
	}
}

// withInfraRef is a MachineDeployment (0 to 3) whose machines' template
// is the FooMachineTemplate named template.
func withInfraRef(ns, name string, replicas int64, template string) *unstructured.Unstructured {
	u := scalable(capi.MachineDeployment, ns, name, replicas, map[string]string{capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "3"}, nil, "")
	_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"apiGroup": "infrastructure.cluster.x-k8s.io",
		"kind": "FooMachineTemplate", "name": template}, "spec", "template", "spec", "infrastructureRef")
	return u
}

// fooTemplate is an infrastructure template whose status.capacity is 32
// cpu and 128Gi.
func fooTemplate(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "FooMachineTemplate",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"status":   map[string]any{"capacity": map[string]any{"cpu": "32", "memory": "128Gi"}},
	}}
}

// A group's price is its draxr.dev/node-price-per-hour annotation; a bad
// one leaves that group out with an error naming it and the annotation,
// and the other groups stay.
func TestNodePrice(t *testing.T) {
	f := newFake(t, []runtime.Object{
		scalable(capi.MachineDeployment, "ns", "priced", 1, bounds(0, 5, capi.PriceAnnotation, "0.75"), nil, ""),
		scalable(capi.MachineDeployment, "ns", "unpriced", 1, bounds(0, 5), nil, ""),
		scalable(capi.MachineDeployment, "ns", "typo", 1, bounds(0, 5, capi.PriceAnnotation, "0,75"), nil, ""),
	})
	p := f.provider(t)
	got := map[string]string{}
	for _, g := range p.NodeGroups() {
		price, err := cloudprovider.NodePrice(g)
		switch {
		case errors.Is(err, cloudprovider.ErrNotImplemented):
			got[g.Id()] = "unknown"
		case err != nil:
			t.Fatalf("%s: %v", g.Id(), err)
		default:
			got[g.Id()] = fmt.Sprint(price)
		}
	}
	want := map[string]string{"MachineDeployment/ns/priced": "0.75", "MachineDeployment/ns/unpriced": "unknown"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("prices %v, want %v", got, want)
	}
	err := p.GroupErrors()["MachineDeployment/ns/typo"]
	const wantErr = `MachineDeployment ns/typo: annotation draxr.dev/node-price-per-hour: "0,75" is not a number`
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("typo's error = %v, want %q", err, wantErr)
	}
}
