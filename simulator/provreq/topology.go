package provreq

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/scaleup"
)

// Kueue's Topology-Aware Scheduling annotations on a podSet's template,
// copied into the PodTemplate of the ProvisioningRequest it creates; the
// value is a node label key (a topology level).
const (
	RequiredTopologyAnnotation  = "kueue.x-k8s.io/podset-required-topology"
	PreferredTopologyAnnotation = "kueue.x-k8s.io/podset-preferred-topology"
)

// topologyRequest is the one domain a request asks for: Kueue applies
// one detail value to all podSets, so all share one key.
type topologyRequest struct {
	key      string
	required bool
}

// topologyOf reads the request's topology from its pods (built from its
// PodTemplates, annotations included): a required key wins over a
// preferred one; two podSets requiring different keys, or a value that
// is not a label key, is an InvalidError naming the template.
func topologyOf(pr *prv1.ProvisioningRequest, pods []*v1.Pod) (topologyRequest, error) {
	var t topologyRequest
	from := ""
	for _, pod := range pods {
		for _, ann := range []string{RequiredTopologyAnnotation, PreferredTopologyAnnotation} {
			key, ok := pod.Annotations[ann]
			if !ok {
				continue
			}
			field := podSetField(pr, pod)
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return topologyRequest{}, &InvalidError{Request: Key(pr), Field: field,
					Detail: fmt.Sprintf("annotation %s: %q is not a node label key: %s", ann, key, strings.Join(errs, "; "))}
			}
			required := ann == RequiredTopologyAnnotation
			switch {
			case t.key == "" || required && !t.required:
				t, from = topologyRequest{key: key, required: required}, field
			case required && t.key != key:
				return topologyRequest{}, &InvalidError{Request: Key(pr), Field: field,
					Detail: fmt.Sprintf("annotation %s is %q but %s requires %q: a request is placed in one domain (Kueue gives all podSets one value)",
						ann, key, from, t.key)}
			}
			break
		}
	}
	return t, nil
}

// podSetField names the podSet a request pod comes from.
func podSetField(pr *prv1.ProvisioningRequest, pod *v1.Pod) string {
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(pod.Name, pr.Name+"-"), "%d-", &i); err != nil || i >= len(pr.Spec.PodSets) {
		return "spec.podSets"
	}
	return fmt.Sprintf("spec.podSets[%d].podTemplateRef.name (PodTemplate %s/%s)", i, pr.Namespace, pr.Spec.PodSets[i].PodTemplateRef.Name)
}

// decideInDomain decides a request that asks for one topology domain: its
// class's decision is made in each domain of the key (that domain's
// existing nodes, and for the atomic class its groups' new nodes), and
// the domain found with the fewest new nodes is chosen; its value goes in
// Decision.Topology. With no domain, a required request is not found (each
// domain's reason said); a preferred one is decided as without topology.
func (e *Decider) decideInDomain(ctx context.Context, pr *prv1.ProvisioningRequest, pods []*v1.Pod, t topologyRequest) (Decision, error) {
	domains := e.Planner.Domains(t.key)
	snap := e.Planner.Engine.Snapshot()
	best, bestNodes := "", -1
	whys := make([]string, 0, len(domains.Values()))
	for _, v := range domains.Values() {
		snap.Fork()
		d, err := e.inDomain(domains, v).decideClass(ctx, pr, scaleup.InDomain(pods, t.key, v))
		snap.Revert()
		if err != nil {
			return Decision{}, err
		}
		if !d.Provisioned() {
			whys = append(whys, fmt.Sprintf("%s=%s: %s", t.key, v, domainWhy(domains, v, d)))
			continue
		}
		if n := newNodes(d.ScaleUps); bestNodes < 0 || n < bestNodes {
			best, bestNodes = v, n
		}
	}
	if bestNodes >= 0 {
		d, err := e.inDomain(domains, best).decideClass(ctx, pr, scaleup.InDomain(pods, t.key, best))
		if err != nil || !d.Provisioned() {
			return d, err
		}
		d.Topology = &scaleup.Topology{Key: t.key, Value: best}
		d.Condition.Message += fmt.Sprintf(" in %s", d.Topology)
		return d, nil
	}
	if !t.required {
		return e.decideClass(ctx, pr, pods)
	}
	why := fmt.Sprintf("the PodTemplate's annotation %s requires one domain of %s, and no domain holds all %d pods", RequiredTopologyAnnotation, t.key, len(pods))
	if len(whys) > 0 {
		why += ": " + strings.Join(whys, "; ")
	} else {
		why += ": no node and no node group template has the label"
	}
	why += domains.UnknownGroups()
	return Decision{Request: pr, Pods: pods, Condition: notFound(pr, why)}, nil
}

// inDomain is the engine restricted to one domain.
func (e *Decider) inDomain(d *scaleup.Domains, value string) *Decider {
	return &Decider{Planner: e.Planner.ForDomain(d, value), Templates: e.Templates}
}

// domainWhy is what one domain lacks for a request not decided there.
func domainWhy(d *scaleup.Domains, value string, dec Decision) string {
	fit := fmt.Sprintf("%d of %d pods fit its %d existing nodes", len(dec.Pods)-len(dec.NoScaleUp), len(dec.Pods), d.ExistingNodes(value))
	switch {
	case IsCheckCapacity(dec.Request):
		return fit // never new nodes
	case !d.NewNodesPossible(value):
		return fit + ", and no node group makes nodes in it"
	case len(dec.NoScaleUp) > 0:
		return fit + "; " + firstReason(dec.NoScaleUp)
	}
	return fit + "; " + dec.Condition.Message
}

func newNodes(sus []scaleup.ScaleUp) (n int) {
	for _, su := range sus {
		n += su.NewNodes
	}
	return n
}

// bookingDomain is the domain a provisioned request's booking holds: the
// one its provisioningClassDetails name for its topology key. ok is false
// when it has none.
func bookingDomain(pr *prv1.ProvisioningRequest, pods []*v1.Pod) (scaleup.Topology, bool) {
	t, err := topologyOf(pr, pods)
	if err != nil || t.key == "" {
		return scaleup.Topology{}, false
	}
	v, ok := pr.Status.ProvisioningClassDetails[t.key]
	if !ok {
		return scaleup.Topology{}, false
	}
	return scaleup.Topology{Key: t.key, Value: string(v)}, true
}

// Apply sets the decision on pr: its condition and, for a request placed
// in one domain, provisioningClassDetails[key] = value, in the same
// status, as Kueue reads the details only when Provisioned turns true
// (a ProvisioningRequestConfig's podSetUpdates.nodeSelector maps them).
func Apply(pr *prv1.ProvisioningRequest, d Decision, now time.Time) {
	Set(pr, d.Condition, now)
	if d.Topology == nil || !d.Provisioned() {
		return
	}
	if pr.Status.ProvisioningClassDetails == nil {
		pr.Status.ProvisioningClassDetails = map[string]prv1.Detail{}
	}
	pr.Status.ProvisioningClassDetails[d.Topology.Key] = prv1.Detail(d.Topology.Value)
}
