package doctor

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"draxr.dev/draxr/simulator/provreq"
)

// Checks of ProvisioningRequests and of what Kueue will ask for.
const (
	CheckProvReqTemplateMissing = "provisioning-request-template-missing"
	CheckProvReqClassUnserved   = "provisioning-request-class-unserved"
	CheckKueueManagedResources  = "kueue-managed-resources-miss-claims"
)

// queuedProvisioning is GKE's class, served by GKE's autoscaler.
const queuedProvisioning = "queued-provisioning.gke.io"

// provisioningRequests: a podSet naming a PodTemplate that does not exist
// fails the request (FailedToCreatePods); a class that no autoscaler
// serves leaves it without any condition forever.
func (d *doctor) provisioningRequests() {
	templates := map[[2]string]bool{}
	for _, t := range d.objs.PodTemplates {
		templates[[2]string{t.Namespace, t.Name}] = true
	}
	known := []string{provreq.CheckCapacity, provreq.BestEffortAtomic, queuedProvisioning}
	for _, pr := range d.objs.ProvisioningRequests {
		obj := objectOf("ProvisioningRequest", pr)
		for i, ps := range pr.Spec.PodSets {
			if !templates[[2]string{pr.Namespace, ps.PodTemplateRef.Name}] {
				d.add(Finding{Severity: Warning, Check: CheckProvReqTemplateMissing, Objects: []Object{obj},
					Message: fmt.Sprintf("spec.podSets[%d].podTemplateRef.name: PodTemplate %s/%s not found; the autoscaler fails the request (FailedToCreatePods)",
						i, pr.Namespace, ps.PodTemplateRef.Name),
					Advice: "create the PodTemplate before the request (Kueue creates ppt-<request>-<podset> itself), or fix the name"})
			}
		}
		class := pr.Spec.ProvisioningClassName
		if slices.Contains(known, class) || strings.HasSuffix(class, provreq.CheckCapacity) {
			continue
		}
		advice := "use " + provreq.CheckCapacity + " (room on existing nodes) or " + provreq.BestEffortAtomic + " (scale up all or nothing)"
		if near := nearest(class, known); near != "" {
			advice = fmt.Sprintf("did you mean %s? %s", near, advice)
		}
		d.add(Finding{Severity: Warning, Check: CheckProvReqClassUnserved, Objects: []Object{obj},
			Message: fmt.Sprintf("spec.provisioningClassName %q is a class no autoscaler serves (draxr and CA serve %s and %s; GKE %s): the request gets no condition, and Kueue waits for it",
				class, provreq.CheckCapacity, provreq.BestEffortAtomic, queuedProvisioning),
			Advice: advice})
	}
}

// kueueManagedResources: Kueue asks the autoscaler only for podSets whose
// containers request one of a ProvisioningRequestConfig's
// managedResources; a podSet that takes its GPUs through ResourceClaims
// alone never matches, and Kueue admits it without asking (the check is
// Ready: "the provisioning request is not needed").
func (d *doctor) kueueManagedResources() {
	for _, cfg := range d.objs.KueueConfigs {
		managed, _, _ := unstructured.NestedStringSlice(cfg.Object, "spec", "managedResources")
		if len(managed) == 0 {
			continue // every podSet is asked for
		}
		for _, job := range d.objs.QueuedJobs {
			spec := job.Spec.Template.Spec
			if len(spec.ResourceClaims) == 0 || requestsAny(spec, managed) {
				continue
			}
			d.add(Finding{Severity: Warning, Check: CheckKueueManagedResources,
				Objects: []Object{objectOf("ProvisioningRequestConfig", cfg), objectOf("Job", job)},
				Message: fmt.Sprintf("the Job's pods take devices through spec.resourceClaims only, and no container requests any of managedResources %v: "+
					"if its queue's admission check uses this config, Kueue admits it without a ProvisioningRequest and no capacity is asked for",
					managed),
				Advice: "leave managedResources empty (every podSet is asked for), or ask for the devices by a DRA-backed extended resource name " +
					"(KEP-5004) that is listed in managedResources"})
		}
	}
}

func requestsAny(spec v1.PodSpec, names []string) bool {
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, n := range names {
				if _, ok := c.Resources.Requests[v1.ResourceName(n)]; ok {
					return true
				}
				if _, ok := c.Resources.Limits[v1.ResourceName(n)]; ok {
					return true
				}
			}
		}
	}
	return false
}

// nearest is the candidate within a few edits of s, "" when none is.
func nearest(s string, candidates []string) string {
	best, bestDist := "", 4
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
