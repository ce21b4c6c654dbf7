package doctor

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/simulator/provreq"
)

// Checks of topology-placed capacity.
const (
	CheckTopologyKeyUnknown    = "topology-key-on-no-node-group"
	CheckKueueTopologyUnmapped = "kueue-topology-not-mapped"
)

// topology: a PodGroup's topology key or a Kueue TAS annotation naming a
// label no node group template carries blocks every scale-up for it
// (the new nodes' domain cannot be predicted); a ProvisioningRequestConfig
// of draxr's classes without a podSetUpdates mapping for a key its jobs
// require leaves Kueue's second pass free to pick another domain than the
// one draxr provisioned.
func (d *doctor) topology() {
	carried := d.templateLabelKeys()
	for _, pg := range d.objs.PodGroups {
		sc := pg.Spec.SchedulingConstraints
		if sc == nil || len(sc.Topology) == 0 || carried[sc.Topology[0].Key] {
			continue
		}
		d.add(Finding{Severity: Warning, Check: CheckTopologyKeyUnknown, Objects: []Object{objectOf("PodGroup", pg)},
			Message: fmt.Sprintf("spec.schedulingConstraints.topology[0].key %q is a label no node group template carries: "+
				"no new node's domain can be predicted, so the gang never gets a scale-up", sc.Topology[0].Key),
			Advice: "model each domain (rack, block, clique) as a node group whose template carries the label with its value (docs/topology.md)"})
	}
	required := map[string][]Object{}
	for _, t := range d.annotatedTemplates() {
		for _, ann := range []string{provreq.RequiredTopologyAnnotation, provreq.PreferredTopologyAnnotation} {
			key, ok := t.annotations[ann]
			if !ok {
				continue
			}
			if ann == provreq.RequiredTopologyAnnotation {
				required[key] = append(required[key], t.obj)
			}
			if !carried[key] {
				d.add(Finding{Severity: Warning, Check: CheckTopologyKeyUnknown, Objects: []Object{t.obj},
					Message: fmt.Sprintf("annotation %s %q is a label no node group template carries: draxr cannot place new nodes in one domain of it", ann, key),
					Advice:  "model each domain as a node group whose template carries the label with its value (docs/topology.md)"})
			}
		}
	}
	d.kueueTopologyMapped(required)
}

// kueueTopologyMapped: each config of draxr's classes maps every key
// required by a queued job or PodTemplate to the detail draxr writes.
func (d *doctor) kueueTopologyMapped(required map[string][]Object) {
	keys := make([]string, 0, len(required))
	for k := range required {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, cfg := range d.objs.KueueConfigs {
		class, _, _ := unstructured.NestedString(cfg.Object, "spec", "provisioningClassName")
		if class != provreq.BestEffortAtomic && class != provreq.CheckCapacity {
			continue
		}
		mapped := map[string]bool{}
		entries, _, _ := unstructured.NestedSlice(cfg.Object, "spec", "podSetUpdates", "nodeSelector")
		for _, e := range entries {
			m, _ := e.(map[string]any)
			key, _ := m["key"].(string)
			detail, _ := m["valueFromProvisioningClassDetail"].(string)
			if key != "" && key == detail {
				mapped[key] = true
			}
		}
		for _, key := range keys {
			if mapped[key] {
				continue
			}
			d.add(Finding{Severity: Warning, Check: CheckKueueTopologyUnmapped,
				Objects: append([]Object{objectOf("ProvisioningRequestConfig", cfg)}, required[key]...),
				Message: fmt.Sprintf("spec.podSetUpdates.nodeSelector has no entry {key: %s, valueFromProvisioningClassDetail: %s}, and %d template(s) require that topology: "+
					"draxr writes the domain it provisions in provisioningClassDetails[%s], but without the mapping Kueue's second pass may place the job in another domain",
					key, key, len(required[key]), key),
				Advice: fmt.Sprintf("add to the config: podSetUpdates: {nodeSelector: [{key: %s, valueFromProvisioningClassDetail: %s}]}", key, key)})
		}
	}
}

// templateLabelKeys are the label keys some node group's template
// carries: draxr NodeGroups and Cluster API groups' capacity labels.
func (d *doctor) templateLabelKeys() map[string]bool {
	out := map[string]bool{}
	for _, g := range d.objs.NodeGroups {
		for k := range g.Spec.Template.Labels {
			out[k] = true
		}
	}
	for _, u := range d.objs.ClusterAPI {
		if !capi.IsScalableKind(u.GetKind()) {
			continue
		}
		r, err := capi.FromUnstructured(u)
		if err != nil {
			continue
		}
		if node, err := r.TemplateNode(); err == nil {
			for k := range node.Labels {
				out[k] = true
			}
		}
	}
	return out
}

type annotatedTemplate struct {
	obj         Object
	annotations map[string]string
}

// annotatedTemplates are the pod templates Kueue copies into requests:
// PodTemplates and queued Jobs' templates with a TAS annotation.
func (d *doctor) annotatedTemplates() []annotatedTemplate {
	var out []annotatedTemplate
	tas := func(a map[string]string) bool {
		for k := range a {
			if strings.HasPrefix(k, "kueue.x-k8s.io/podset-") && strings.HasSuffix(k, "-topology") {
				return true
			}
		}
		return false
	}
	for _, t := range d.objs.PodTemplates {
		if tas(t.Template.Annotations) {
			out = append(out, annotatedTemplate{objectOf("PodTemplate", t), t.Template.Annotations})
		}
	}
	for _, j := range d.objs.QueuedJobs {
		if tas(j.Spec.Template.Annotations) {
			out = append(out, annotatedTemplate{objectOf("Job", j), j.Spec.Template.Annotations})
		}
	}
	return out
}
