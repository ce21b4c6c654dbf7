// Package capi reads Cluster API scalable resources (MachineDeployment,
// MachineSet, MachinePool in cluster.x-k8s.io/v1beta2) as node groups,
// with the Cluster Autoscaler's annotations: size bounds, per-group
// autoscaling options and the capacity.cluster-autoscaler.kubernetes.io/*
// scale-from-zero template; plus draxr's full template ResourceSlices. It
// lives in simulator/ so that both the offline planner and the clusterapi
// cloud provider read a group the same way.
package capi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/taints"
)

// CAPI's group, version and the kinds that are node groups.
const (
	Group             = "cluster.x-k8s.io"
	Version           = "v1beta2"
	APIVersion        = Group + "/" + Version
	MachineDeployment = "MachineDeployment"
	MachineSet        = "MachineSet"
	MachinePool       = "MachinePool"
	Machine           = "Machine"
)

// Versions are the versions of Cluster API's kinds a dump may hold: CAPI
// v1.11+ serves v1beta2 and still v1beta1, which has the fields the
// provider reads in the same places.
func Versions() []string { return []string{"v1beta2", "v1beta1"} }

// Annotations and labels CA's clusterapi provider reads or writes.
const (
	MinSizeAnnotation       = Group + "/cluster-api-autoscaler-node-group-min-size"
	MaxSizeAnnotation       = Group + "/cluster-api-autoscaler-node-group-max-size"
	DeleteMachineAnnotation = Group + "/delete-machine"
	ClusterNameLabel        = Group + "/cluster-name"

	CapacityPrefix            = "capacity.cluster-autoscaler.kubernetes.io/"
	CPUAnnotation             = CapacityPrefix + "cpu"
	MemoryAnnotation          = CapacityPrefix + "memory"
	DiskAnnotation            = CapacityPrefix + "ephemeral-disk"
	MaxPodsAnnotation         = CapacityPrefix + "maxPods"
	GPUTypeAnnotation         = CapacityPrefix + "gpu-type"
	GPUCountAnnotation        = CapacityPrefix + "gpu-count"
	LabelsAnnotation          = CapacityPrefix + "labels"
	TaintsAnnotation          = CapacityPrefix + "taints"
	DRADriverAnnotation       = CapacityPrefix + "dra-driver"
	DefaultMaxPods      int64 = 110
)

// draxr's additions: the full ResourceSliceSpecs a new node publishes,
// inline (YAML or JSON list) or in a ConfigMap ("name" in the group's
// namespace, or "namespace/name"; key TemplateSlicesKey).
const (
	TemplateSlicesAnnotation          = "draxr.dev/template-resource-slices"
	TemplateSlicesConfigMapAnnotation = "draxr.dev/template-resource-slices-configmap"
	TemplateSlicesKey                 = "resourceSlices"
	// PriceAnnotation is one node's price per hour (a decimal number),
	// for --expander=price. CA's clusterapi provider has no pricing, so
	// the name is draxr's.
	PriceAnnotation = "draxr.dev/node-price-per-hour"
)

// Resource is the part of a scalable resource the autoscaler reads.
type Resource struct {
	Kind, Namespace, Name string
	UID                   string
	Annotations, Labels   map[string]string
	// Replicas is spec.replicas; nil when unset.
	Replicas    *int64
	ClusterName string
	// OwnedByMachineDeployment: such a MachineSet is not a group itself.
	OwnedByMachineDeployment bool
	// InfraRef is spec.template.spec.infrastructureRef, nil when unset.
	InfraRef *InfraRef
	// Infra is what the referenced infrastructure template publishes for
	// scale from zero (CAPI's opt-in status.capacity and
	// status.nodeInfo); the capacity annotations win over it. Filled in
	// by the reader that can fetch the template (ReadInfraStatus).
	Infra InfraStatus
}

// InfraRef names a group's infrastructure template (v1beta2 contract
// reference: API group, kind, name in the group's namespace).
type InfraRef struct {
	APIGroup, Kind, Name string
}

// InfraStatus is an infrastructure template's scale-from-zero hints.
type InfraStatus struct {
	Capacity                      v1.ResourceList
	Architecture, OperatingSystem string
}

// ReadInfraStatus reads the template's status.capacity (a map of
// resource names to quantities) and status.nodeInfo; what is absent is
// empty, a value that is not a quantity is an error naming the field.
func ReadInfraStatus(u *unstructured.Unstructured) (InfraStatus, error) {
	var out InfraStatus
	what := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	raw, found, err := unstructured.NestedMap(u.Object, "status", "capacity")
	if err != nil {
		return out, fmt.Errorf("%s: status.capacity: %w", what, err)
	}
	if found {
		out.Capacity = v1.ResourceList{}
		for name, v := range raw {
			str := fmt.Sprint(v)
			q, err := resource.ParseQuantity(str)
			if err != nil || q.Sign() < 0 {
				return InfraStatus{}, fmt.Errorf("%s: status.capacity[%s]: %q is not a non-negative quantity", what, name, str)
			}
			if err := checkCapacity(v1.ResourceName(name), str, q); err != nil {
				return InfraStatus{}, fmt.Errorf("%s: status.capacity[%s]: %w", what, name, err)
			}
			out.Capacity[v1.ResourceName(name)] = q
		}
	}
	out.Architecture, _, _ = unstructured.NestedString(u.Object, "status", "nodeInfo", "architecture")
	out.OperatingSystem, _, _ = unstructured.NestedString(u.Object, "status", "nodeInfo", "operatingSystem")
	return out, nil
}

// maxCores is the most cores a node's cpu may say: far beyond any machine,
// so that only a mistake passes it ("8G", cores for bytes).
const maxCores = 100_000

// checkCapacity refuses a quantity (written as s) that cannot be the
// resource's: cpu counts cores ("8") or millicores ("7500m"), so a binary
// suffix ("8Gi", memory's) or more than maxCores is a mistake that would
// plan nodes of billions of cores. Other resources take any quantity.
func checkCapacity(name v1.ResourceName, s string, q resource.Quantity) error {
	if name != v1.ResourceCPU {
		return nil
	}
	if q.Format == resource.BinarySI {
		return fmt.Errorf("%q is not a number of cores: cpu takes cores (\"8\") or millicores (\"7500m\"), not a binary suffix", s)
	}
	if q.Cmp(*resource.NewQuantity(maxCores, resource.DecimalSI)) > 0 {
		return fmt.Errorf("%q is more than %d cores, more than any node has", s, maxCores)
	}
	return nil
}

// IsScalableKind says whether kind is one of the node-group kinds.
func IsScalableKind(kind string) bool {
	return kind == MachineDeployment || kind == MachineSet || kind == MachinePool
}

// FromUnstructured reads the fields of u the autoscaler needs.
func FromUnstructured(u *unstructured.Unstructured) (Resource, error) {
	r := Resource{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
		Annotations: u.GetAnnotations(), Labels: u.GetLabels()}
	replicas, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return r, fmt.Errorf("%s: spec.replicas: %w", r, err)
	}
	if found {
		r.Replicas = &replicas
	}
	// spec.clusterName first, the cluster-name label for older objects (as CA).
	if name, found, _ := unstructured.NestedString(u.Object, "spec", "clusterName"); found {
		r.ClusterName = name
	} else {
		r.ClusterName = r.Labels[ClusterNameLabel]
	}
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == MachineDeployment && ref.Name != "" {
			r.OwnedByMachineDeployment = true
		}
	}
	if ref, found, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "infrastructureRef"); found && ref["kind"] != "" && ref["name"] != "" {
		group := ref["apiGroup"]
		if group == "" && ref["apiVersion"] != "" { // v1beta1 names the version too
			group, _, _ = strings.Cut(ref["apiVersion"], "/")
		}
		r.InfraRef = &InfraRef{APIGroup: group, Kind: ref["kind"], Name: ref["name"]}
	}
	return r, nil
}

func (r Resource) String() string { return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name) }

// ID is the group's name as CA gives it: "<Kind>/<namespace>/<name>".
func (r Resource) ID() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// NodeNamePrefix is a DNS-label-safe stem for the group's template nodes.
func (r Resource) NodeNamePrefix() string {
	s := strings.ToLower(r.Kind + "-" + r.Namespace + "-" + r.Name)
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-.")
	}
	return s
}

// AnnotationError names the object and annotation a bad value came from.
type AnnotationError struct {
	Object     string
	Annotation string
	Err        error
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("%s: annotation %s: %v", e.Object, e.Annotation, e.Err)
}

func (e *AnnotationError) Unwrap() error { return e.Err }

func (r Resource) annotationErr(key string, err error) error {
	return &AnnotationError{Object: r.String(), Annotation: key, Err: err}
}

// Bounds parses the min and max size annotations as CA does: a missing
// one is 0, a value that is not a non-negative integer or max < min is an
// error.
func (r Resource) Bounds() (minSize, maxSize int, err error) {
	get := func(key string) (int, error) {
		v, ok := r.Annotations[key]
		if !ok {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, r.annotationErr(key, fmt.Errorf("%q is not an integer", v))
		}
		if n < 0 {
			return 0, r.annotationErr(key, fmt.Errorf("%d is negative", n))
		}
		return n, nil
	}
	if minSize, err = get(MinSizeAnnotation); err != nil {
		return 0, 0, err
	}
	if maxSize, err = get(MaxSizeAnnotation); err != nil {
		return 0, 0, err
	}
	if maxSize < minSize {
		return 0, 0, r.annotationErr(MaxSizeAnnotation, fmt.Errorf("%d is below the min size %d", maxSize, minSize))
	}
	return minSize, maxSize, nil
}

// Options parses the cluster.x-k8s.io/autoscaling-options-* annotations.
// Unknown keys are ignored, as CA ignores them.
func (r Resource) Options() (nodegroup.Options, error) {
	o, err := nodegroup.ParseOptions(r.Annotations)
	var oe *nodegroup.OptionError
	if errors.As(err, &oe) {
		return o, r.annotationErr(oe.Annotation, oe.Err)
	}
	return o, err
}

// Price parses PriceAnnotation: "" (unknown) when unset, an error naming
// the object and annotation when it is not a number >= 0.
func (r Resource) Price() (nodegroup.Price, error) {
	v, ok := r.Annotations[PriceAnnotation]
	if !ok {
		return "", nil
	}
	p := nodegroup.Price(strings.TrimSpace(v))
	if _, known, err := p.Value(); err != nil || !known {
		if err == nil {
			err = errors.New("the value is empty; give one node's price per hour (e.g. 0.096) or remove the annotation")
		}
		return "", r.annotationErr(PriceAnnotation, err)
	}
	return p, nil
}

// CanScaleFromZero is CA's rule: cpu and memory capacity are known, from
// the annotations or the infrastructure template's status.capacity.
func (r Resource) CanScaleFromZero() bool {
	known := func(key string, name v1.ResourceName) bool {
		if r.Annotations[key] != "" {
			return true
		}
		q, ok := r.Infra.Capacity[name]
		return ok && !q.IsZero()
	}
	return known(CPUAnnotation, v1.ResourceCPU) && known(MemoryAnnotation, v1.ResourceMemory)
}

// TemplateNode builds the node a new member will be from the capacity
// annotations over the infrastructure template's status, or returns nil
// when cpu and memory are not both known.
func (r Resource) TemplateNode() (*v1.Node, error) {
	if !r.CanScaleFromZero() {
		return nil, nil
	}
	capacity, err := r.templateCapacity()
	if err != nil {
		return nil, err
	}
	labels, err := r.parseLabels()
	if err != nil {
		return nil, err
	}
	taints, err := r.parseTaints()
	if err != nil {
		return nil, err
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: r.NodeNamePrefix() + "-template", Labels: labels},
		Spec:       v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
	r.addOSAndArch(node.Labels)
	return node, nil
}

// templateCapacity is the infrastructure template's capacity with the
// annotations' over it: cpu, memory, disk, max pods (else the default)
// and a GPU count with its type.
func (r Resource) templateCapacity() (v1.ResourceList, error) {
	capacity := r.Infra.Capacity.DeepCopy()
	if capacity == nil {
		capacity = v1.ResourceList{}
	}
	for key, name := range map[string]v1.ResourceName{CPUAnnotation: v1.ResourceCPU, MemoryAnnotation: v1.ResourceMemory,
		DiskAnnotation: v1.ResourceEphemeralStorage} {
		if err := r.annotationQuantity(capacity, key, name); err != nil {
			return nil, err
		}
	}
	maxPods, err := r.annotationInt(MaxPodsAnnotation)
	if err != nil {
		return nil, err
	}
	if maxPods > 0 {
		capacity[v1.ResourcePods] = *resource.NewQuantity(maxPods, resource.DecimalSI)
	} else if q, ok := capacity[v1.ResourcePods]; !ok || q.IsZero() {
		capacity[v1.ResourcePods] = *resource.NewQuantity(DefaultMaxPods, resource.DecimalSI)
	}
	gpus, err := r.annotationInt(GPUCountAnnotation)
	if err != nil {
		return nil, err
	}
	// As CA: a GPU count becomes a device-plugin resource only with its
	// type; with dra-driver it is a DRA device instead (TemplateSlices).
	if gpuType := r.Annotations[GPUTypeAnnotation]; gpus > 0 && gpuType != "" {
		if errs := validation.IsQualifiedName(gpuType); len(errs) > 0 {
			return nil, r.annotationErr(GPUTypeAnnotation, fmt.Errorf("%q is not a resource name: %s", gpuType, strings.Join(errs, "; ")))
		}
		capacity[v1.ResourceName(gpuType)] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return capacity, nil
}

// annotationQuantity sets capacity's name from annotation key, when set
// and not zero (zero leaves the infrastructure template's).
func (r Resource) annotationQuantity(capacity v1.ResourceList, key string, name v1.ResourceName) error {
	v := r.Annotations[key]
	if v == "" {
		return nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return r.annotationErr(key, fmt.Errorf("%q is not a quantity", v))
	}
	if q.Sign() < 0 {
		return r.annotationErr(key, fmt.Errorf("%q is negative", v))
	}
	if err := checkCapacity(name, v, q); err != nil {
		return r.annotationErr(key, err)
	}
	if !q.IsZero() {
		capacity[name] = q
	}
	return nil
}

// annotationInt is annotation key's non-negative integer, 0 when unset.
func (r Resource) annotationInt(key string) (int64, error) {
	v := r.Annotations[key]
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, r.annotationErr(key, fmt.Errorf("%q is not a non-negative integer", v))
	}
	return n, nil
}

// addOSAndArch gives a template node CA's generic OS and architecture
// labels, or what the infrastructure template says, where the labels
// annotation sets none.
func (r Resource) addOSAndArch(labels map[string]string) {
	os, arch := "linux", "amd64"
	if r.Infra.OperatingSystem != "" {
		os = r.Infra.OperatingSystem
	}
	if r.Infra.Architecture != "" {
		arch = r.Infra.Architecture
	}
	for k, v := range map[string]string{v1.LabelOSStable: os, v1.LabelArchStable: arch} {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
}

func (r Resource) parseLabels() (map[string]string, error) {
	out := map[string]string{}
	v := r.Annotations[LabelsAnnotation]
	if v == "" {
		return out, nil
	}
	for _, kv := range strings.Split(v, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, r.annotationErr(LabelsAnnotation, fmt.Errorf("%q is not key=value", kv))
		}
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(val)...); len(errs) > 0 {
			return nil, r.annotationErr(LabelsAnnotation, fmt.Errorf("label %q: %s", kv, strings.Join(errs, "; ")))
		}
		out[k] = val
	}
	return out, nil
}

func (r Resource) parseTaints() ([]v1.Taint, error) {
	v := r.Annotations[TaintsAnnotation]
	if v == "" {
		return nil, nil
	}
	var out []v1.Taint
	for _, spec := range strings.Split(v, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, r.annotationErr(TaintsAnnotation, fmt.Errorf("taint %q has no effect (key=value:Effect)", spec))
		}
		switch t := v1.TaintEffect(effect); t {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, r.annotationErr(TaintsAnnotation, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", spec, effect))
		}
		key, value, _ := strings.Cut(kv, "=")
		errs := validation.IsQualifiedName(key)
		if value != "" {
			errs = append(errs, validation.IsValidLabelValue(value)...)
		}
		if len(errs) > 0 {
			return nil, r.annotationErr(TaintsAnnotation, fmt.Errorf("taint %q: %s", spec, strings.Join(errs, "; ")))
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

// ConfigMapRef returns the ConfigMap the template slices are in, if the
// reference annotation is set.
func (r Resource) ConfigMapRef() (namespace, name string, ok bool, err error) {
	v, ok := r.Annotations[TemplateSlicesConfigMapAnnotation]
	if !ok {
		return "", "", false, nil
	}
	namespace, name = r.Namespace, v
	if ns, n, found := strings.Cut(v, "/"); found {
		namespace, name = ns, n
	}
	for _, s := range []string{namespace, name} {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return "", "", false, r.annotationErr(TemplateSlicesConfigMapAnnotation,
				fmt.Errorf("%q is not name or namespace/name: %s", v, strings.Join(errs, "; ")))
		}
	}
	return namespace, name, true, nil
}

// TemplateSlices returns the ResourceSliceSpecs a new node publishes:
// draxr's annotation, else the ConfigMap it references (configMapData is
// its data, nil when there is no reference), else CA's synthetic slice
// from dra-driver and gpu-count, else none.
func (r Resource) TemplateSlices(configMapData map[string]string) ([]resourceapi.ResourceSliceSpec, error) {
	if v, ok := r.Annotations[TemplateSlicesAnnotation]; ok {
		specs, err := ParseSliceSpecs([]byte(v))
		if err != nil {
			return nil, r.annotationErr(TemplateSlicesAnnotation, err)
		}
		return specs, nil
	}
	if ns, name, ok, err := r.ConfigMapRef(); err != nil || ok {
		if err != nil {
			return nil, err
		}
		data, found := configMapData[TemplateSlicesKey]
		if !found {
			return nil, r.annotationErr(TemplateSlicesConfigMapAnnotation,
				fmt.Errorf("ConfigMap %s/%s has no key %q", ns, name, TemplateSlicesKey))
		}
		specs, err := ParseSliceSpecs([]byte(data))
		if err != nil {
			return nil, r.annotationErr(TemplateSlicesConfigMapAnnotation, fmt.Errorf("ConfigMap %s/%s key %q: %w", ns, name, TemplateSlicesKey, err))
		}
		return specs, nil
	}
	driver := r.Annotations[DRADriverAnnotation]
	if driver == "" {
		return nil, nil
	}
	if errs := validation.IsDNS1123Subdomain(driver); len(errs) > 0 {
		return nil, r.annotationErr(DRADriverAnnotation, fmt.Errorf("%q is not a driver name: %s", driver, strings.Join(errs, "; ")))
	}
	count := r.Annotations[GPUCountAnnotation]
	n, err := strconv.ParseInt(count, 10, 32)
	if count == "" || n == 0 {
		return nil, nil
	}
	if err != nil || n < 0 {
		return nil, r.annotationErr(GPUCountAnnotation, fmt.Errorf("%q is not a non-negative integer", count))
	}
	return []resourceapi.ResourceSliceSpec{SyntheticSlice(driver, int(n))}, nil
}

// SyntheticSlice is CA's stand-in for the slice a GPU node's driver will
// publish when nothing better describes it: n devices gpu-0..gpu-(n-1)
// of driver, each with the attribute type "gpu".
func SyntheticSlice(driver string, n int) resourceapi.ResourceSliceSpec {
	spec := resourceapi.ResourceSliceSpec{Driver: driver}
	for i := range n {
		spec.Devices = append(spec.Devices, resourceapi.Device{
			Name:       "gpu-" + strconv.Itoa(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("gpu")}},
		})
	}
	return spec
}

// ParseSliceSpecs reads a YAML or JSON list of ResourceSliceSpecs,
// strictly (an unknown field is an error), without nodeName or pool:
// those are filled in per node.
func ParseSliceSpecs(data []byte) ([]resourceapi.ResourceSliceSpec, error) {
	var specs []resourceapi.ResourceSliceSpec
	if err := yaml.UnmarshalStrict(data, &specs); err != nil {
		msg := err.Error()
		for _, prefix := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
			msg = strings.TrimPrefix(msg, prefix)
		}
		return nil, fmt.Errorf("not a list of ResourceSliceSpecs: %s", msg)
	}
	for i, s := range specs {
		switch {
		case s.Driver == "":
			return nil, fmt.Errorf("[%d].driver is required", i)
		case s.NodeName != nil || s.Pool.Name != "":
			return nil, fmt.Errorf("[%d]: nodeName and pool are filled in per node; leave them out", i)
		case len(s.Devices) == 0 && len(s.SharedCounters) == 0:
			return nil, fmt.Errorf("[%d] (driver %s) lists no devices and no sharedCounters", i, s.Driver)
		}
	}
	return specs, nil
}

// NodeGroup is a scalable resource as the planner sees it.
type NodeGroup struct {
	Resource
	Options nodegroup.Options
	// Planning holds the bounds, template node and template slices.
	Planning *nodegroup.NodeGroup
}

// Build reads r as a node group; nil (and no error) when CA would not
// make it one: a MachineSet owned by a MachineDeployment, max size 0, or
// 0 replicas without a scale-from-zero template. configMapData is the
// data of the ConfigMap r references, if any. When member is set (a ready
// node of the group and its slices), it is the template instead of the
// annotations.
func Build(r Resource, configMapData map[string]string, member *NodeCopy) (*NodeGroup, error) {
	if !IsScalableKind(r.Kind) || r.Kind == MachineSet && r.OwnedByMachineDeployment {
		return nil, nil
	}
	minSize, maxSize, err := r.Bounds()
	if err != nil {
		return nil, err
	}
	if maxSize == 0 {
		return nil, nil
	}
	opts, err := r.Options()
	if err != nil {
		return nil, err
	}
	price, err := r.Price()
	if err != nil {
		return nil, err
	}
	// Parse everything, even when a live node will be the template, so a
	// bad annotation is reported while the group still has nodes.
	node, err := r.TemplateNode()
	if err != nil {
		return nil, err
	}
	slices, err := r.TemplateSlices(configMapData)
	if err != nil {
		return nil, err
	}
	if member != nil && member.Node != nil {
		node = Sanitize(member.Node, r.NodeNamePrefix(), member.Taints)
		if len(member.Slices) > 0 {
			slices = member.Slices
		}
	}
	if node == nil {
		if r.Replicas != nil && *r.Replicas == 0 {
			return nil, nil // CA skips a group it cannot scale from zero
		}
		return nil, fmt.Errorf("%s: no ready node to copy and no scale-from-zero template (annotations %s and %s, or the infrastructure template's status.capacity)",
			r, CPUAnnotation, MemoryAnnotation)
	}
	g := &nodegroup.NodeGroup{}
	g.APIVersion, g.Kind = nodegroup.APIVersion, nodegroup.Kind
	g.Name = r.ID()
	g.Spec.MinSize, g.Spec.MaxSize = minSize, maxSize
	g.Spec.Template = *node
	g.Spec.ResourceSlices = slices
	g.Spec.Price = price
	return &NodeGroup{Resource: r, Options: opts, Planning: g}, nil
}

// NodeCopy is a member node a group's template is copied from, with the
// specs of its slices.
type NodeCopy struct {
	Node   *v1.Node
	Slices []resourceapi.ResourceSliceSpec
	// Taints says which of the node's taints a new node will not have
	// (the --startup-taint and --status-taint flags).
	Taints taints.Config
}

// Sanitize keeps what a copy of a live node shares with a new one:
// labels (but its hostname), taints, capacity and allocatable; CA's own
// taints and those it drops from templates go. The copy is named
// prefix-template.
func Sanitize(n *v1.Node, prefix string, tc taints.Config) *v1.Node {
	out := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-template", Labels: map[string]string{}}}
	for k, v := range n.Labels {
		if k != v1.LabelHostname {
			out.Labels[k] = v
		}
	}
	for _, t := range n.Spec.Taints {
		if tc.LeftOutOfTemplate(t.Key) {
			continue
		}
		out.Spec.Taints = append(out.Spec.Taints, t)
	}
	out.Status.Capacity = n.Status.Capacity.DeepCopy()
	out.Status.Allocatable = n.Status.Allocatable.DeepCopy()
	out.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	return out
}

// SliceSpecs returns the specs of a live node's slices as a new node's
// template: nodegroup.CopySliceSpecs, which says what it leaves out (device
// taints, unhealthy marks) and why.
func SliceSpecs(slices []*resourceapi.ResourceSlice) []resourceapi.ResourceSliceSpec {
	return nodegroup.CopySliceSpecs(slices)
}
