// Package infra is draxr's tiny Cluster API infrastructure provider for
// tests: an InfraMachine is "provisioned" by creating its Node with the
// machine's providerID, turning it Ready after ReadyDelay and publishing
// the ResourceSlices its template lists, as the group's DRA driver would.
// It follows CAPI's v1beta2 InfraMachine contract (spec.providerID,
// status.initialization.provisioned) and is never linked into a shipped
// binary.
package infra

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Group, version and kinds of the test provider.
const (
	Group            = "infrastructure.draxr.dev"
	Version          = "v1alpha1"
	MachineKind      = "DraxrInfraMachine"
	TemplateKind     = "DraxrInfraMachineTemplate"
	ProviderIDPrefix = "draxr-test:///"
	finalizer        = "infrastructure.draxr.dev/slices"
	// NamespaceLabel on a Node names its InfraMachine's namespace, so a
	// test counts its own nodes, not those other tests left.
	NamespaceLabel = Group + "/namespace"
)

// MachineGVK is the InfraMachine's kind.
func MachineGVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: Version, Kind: MachineKind}
}

// CRDs returns the InfraMachine and InfraMachineTemplate CRDs, labelled
// with the CAPI contract they implement (v1beta2).
func CRDs() []*apiextensionsv1.CustomResourceDefinition {
	crd := func(kind string) *apiextensionsv1.CustomResourceDefinition {
		plural := strings.ToLower(kind) + "s"
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + "." + Group, Labels: map[string]string{"cluster.x-k8s.io/v1beta2": Version}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: Group, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: Version, Served: true, Storage: true,
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec":   {Type: "object", XPreserveUnknownFields: ptr.To(true)},
							"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
						},
					}},
				}},
			},
		}
	}
	return []*apiextensionsv1.CustomResourceDefinition{crd(MachineKind), crd(TemplateKind)}
}

// Template returns an InfraMachineTemplate whose machines publish slices.
func Template(namespace, name string, slices []resourceapi.ResourceSliceSpec, cpu string, neverProvision bool) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(slices)
	if err != nil {
		return nil, err
	}
	var list []any
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": TemplateKind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"resourceSlices": list, "cpu": cpu, "neverProvision": neverProvision,
		}}},
	}}
	return u, nil
}

// WithStartupTaint makes a template's machines register with a NoSchedule
// taint key, lifted hold after the node turns Ready: what a GPU driver or
// CNI agent does while it starts.
func WithStartupTaint(tmpl *unstructured.Unstructured, key string, hold time.Duration) error {
	if err := unstructured.SetNestedField(tmpl.Object, key, "spec", "template", "spec", "startupTaint"); err != nil {
		return err
	}
	return unstructured.SetNestedField(tmpl.Object, hold.String(), "spec", "template", "spec", "startupTaintHold")
}

// Reconciler provisions InfraMachines.
type Reconciler struct {
	Client client.Client
	// Kube is the workload cluster the machines join; WorkloadOf, when
	// set and it knows the InfraMachine's namespace, names another one
	// (a management cluster serving several workload clusters).
	Kube       kubernetes.Interface
	WorkloadOf func(namespace string) kubernetes.Interface
	ReadyDelay time.Duration
}

// workload is the cluster m's node joins.
func (r *Reconciler) workload(m *unstructured.Unstructured) kubernetes.Interface {
	if r.WorkloadOf != nil {
		if k := r.WorkloadOf(m.GetNamespace()); k != nil {
			return k
		}
	}
	return r.Kube
}

// SetupWithManager watches InfraMachines.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(MachineGVK())
	return ctrl.NewControllerManagedBy(mgr).Named("draxr-infra-machine").For(u).Complete(r)
}

// Reconcile moves one InfraMachine along: providerID and Node, Ready and
// slices after ReadyDelay, provisioned; on deletion its slices go.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(MachineGVK())
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	nodeName := nodeNameOf(m)
	kube := r.workload(m)
	if m.GetDeletionTimestamp() != nil {
		err := kube.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + nodeName})
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := kube.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(m, finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, m))
	}
	if never, _, _ := unstructured.NestedBool(m.Object, "spec", "neverProvision"); never {
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(m, finalizer) {
		providerID := ProviderIDPrefix + nodeName
		if err := unstructured.SetNestedField(m.Object, providerID, "spec", "providerID"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = r.createNode(ctx, m, nodeName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !isReady(node) {
		if wait := r.ReadyDelay - time.Since(node.CreationTimestamp.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if err := r.publishSlices(ctx, m, nodeName); err != nil {
			return ctrl.Result{}, err
		}
		node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if node, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The API server taints new nodes not-ready; no node lifecycle
	// controller runs in the test control plane to lift it.
	if err := r.liftNotReadyTaint(ctx, kube, node); err != nil {
		return ctrl.Result{}, err
	}
	requeue, err := r.liftStartupTaint(ctx, m, nodeName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if done, _, _ := unstructured.NestedBool(m.Object, "status", "initialization", "provisioned"); !done {
		if err := unstructured.SetNestedField(m.Object, true, "status", "initialization", "provisioned"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Status().Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// liftStartupTaint lifts the machine's startup taint once its hold has
// passed since the node turned Ready; until then it says when to look
// again.
func (r *Reconciler) liftStartupTaint(ctx context.Context, m *unstructured.Unstructured, nodeName string) (time.Duration, error) {
	key, _, _ := unstructured.NestedString(m.Object, "spec", "startupTaint")
	if key == "" {
		return 0, nil
	}
	holdText, _, _ := unstructured.NestedString(m.Object, "spec", "startupTaintHold")
	hold, err := time.ParseDuration(holdText)
	if err != nil {
		return 0, fmt.Errorf("%s: spec.startupTaintHold: %w", m.GetName(), err)
	}
	node, err := r.workload(m).CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	var readySince time.Time
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
			readySince = c.LastTransitionTime.Time
		}
	}
	if wait := hold - time.Since(readySince); wait > 0 {
		return wait, nil
	}
	kept := node.Spec.Taints[:0]
	for _, t := range node.Spec.Taints {
		if t.Key != key {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(node.Spec.Taints) {
		return 0, nil
	}
	node.Spec.Taints = kept
	_, err = r.workload(m).CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	return 0, err
}

// nodeNameOf: the InfraMachine's name is unique in its namespace and
// already a valid node name.
func nodeNameOf(m *unstructured.Unstructured) string { return m.GetName() }

func (r *Reconciler) createNode(ctx context.Context, m *unstructured.Unstructured, name string) (*v1.Node, error) {
	cpu, _, _ := unstructured.NestedString(m.Object, "spec", "cpu")
	if cpu == "" {
		cpu = "8"
	}
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name, v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64",
			NamespaceLabel: m.GetNamespace()}},
		Spec: v1.NodeSpec{ProviderID: ProviderIDPrefix + name},
	}
	if key, _, _ := unstructured.NestedString(m.Object, "spec", "startupTaint"); key != "" {
		node.Spec.Taints = []v1.Taint{{Key: key, Effect: v1.TaintEffectNoSchedule}}
	}
	created, err := r.workload(m).CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	created.Status.Capacity, created.Status.Allocatable = capacity, capacity
	created.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "Provisioning",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	return r.workload(m).CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
}

func (r *Reconciler) publishSlices(ctx context.Context, m *unstructured.Unstructured, nodeName string) error {
	raw, _, _ := unstructured.NestedSlice(m.Object, "spec", "resourceSlices")
	data, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	var specs []resourceapi.ResourceSliceSpec
	if err := json.Unmarshal(data, &specs); err != nil {
		return fmt.Errorf("%s: spec.resourceSlices: %w", m.GetName(), err)
	}
	perDriver := map[string]int64{}
	for _, s := range specs {
		perDriver[s.Driver]++
	}
	for i, s := range specs {
		s.NodeName = ptr.To(nodeName)
		s.Pool = resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: perDriver[s.Driver]}
		slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", nodeName, i)}, Spec: s}
		if _, err := r.workload(m).ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func (r *Reconciler) liftNotReadyTaint(ctx context.Context, kube kubernetes.Interface, node *v1.Node) error {
	kept := node.Spec.Taints[:0]
	for _, t := range node.Spec.Taints {
		if t.Key != v1.TaintNodeNotReady {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = kept
	_, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	return err
}

func isReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
