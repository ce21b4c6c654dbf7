package input

import (
	"draxr.dev/draxr/simulator/capacitybuffer"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
)

// KueueQueueLabel names the Kueue LocalQueue of a Job.
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// addBatchKinds adds CA's ProvisioningRequest (v1, and v1beta1, whose
// schema is the same) and the PodTemplates its podSets name. A request is
// kept as read, not validated here: what the autoscaler makes of a bad
// one (a Failed condition naming the field) is part of the plan.
func addBatchKinds(handlers map[string]handler) {
	handlers["v1/PodTemplate"] = storedKind[v1.PodTemplate]("PodTemplate", true, func(t *core.PodTemplate) field.ErrorList {
		return corevalidation.ValidatePodTemplate(t, podutil.GetValidationOptionsFromPodTemplate(&t.Template, nil))
	}, func(o *Objects) *[]*v1.PodTemplate { return &o.PodTemplates })
	// Kueue's ProvisioningRequestConfigs (its API is not a dependency of
	// draxr: read as written), for the doctor's check of managedResources.
	for _, version := range []string{"v1beta1", "v1beta2"} {
		handlers["kueue.x-k8s.io/"+version+"/ProvisioningRequestConfig"] = func(p *parser, d doc, raw []byte) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				p.fail(d, describe("ProvisioningRequestConfig", raw), err)
				return
			}
			prepareMeta("ProvisioningRequestConfig", u, false, d.loc)
			store(p, d, object{"ProvisioningRequestConfig", u}, nil, &p.out.KueueConfigs, u)
		}
	}
	// ResourceQuotas cap buffers (status.used is the quota controller's).
	handlers["v1/ResourceQuota"] = storedKind[v1.ResourceQuota]("ResourceQuota", true, func(q *core.ResourceQuota) field.ErrorList {
		return corevalidation.ValidateResourceQuota(q)
	}, func(o *Objects) *[]*v1.ResourceQuota { return &o.ResourceQuotas })
	// CA's CapacityBuffers (v1beta1; v1alpha1 has the same schema).
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		handlers[capacitybuffer.Group+"/"+version+"/"+capacitybuffer.Kind] = func(p *parser, d doc, raw []byte) {
			b := &capacitybuffer.CapacityBuffer{}
			if err := decodeStrict(raw, b); err != nil {
				p.fail(d, describe(capacitybuffer.Kind, raw), err)
				return
			}
			prepareMeta(capacitybuffer.Kind, b, true, d.loc)
			store(p, d, object{capacitybuffer.Kind, b}, nil, &p.out.CapacityBuffers, b)
		}
	}
	for _, version := range []string{"v1", "v1beta1"} {
		handlers[prv1.GroupName+"/"+version+"/ProvisioningRequest"] = func(p *parser, d doc, raw []byte) {
			pr := &prv1.ProvisioningRequest{}
			if err := decodeStrict(raw, pr); err != nil {
				p.fail(d, describe("ProvisioningRequest", raw), err)
				return
			}
			prepareMeta("ProvisioningRequest", pr, true, d.loc)
			store(p, d, object{"ProvisioningRequest", pr}, nil, &p.out.ProvisioningRequests, pr)
		}
	}
}
