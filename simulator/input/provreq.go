package input

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
)

// addBatchKinds adds CA's ProvisioningRequest (v1, and v1beta1, whose
// schema is the same) and the PodTemplates its podSets name. A request is
// kept as read, not validated here: what the autoscaler makes of a bad
// one (a Failed condition naming the field) is part of the plan.
func addBatchKinds(handlers map[string]handler) {
	handlers["v1/PodTemplate"] = storedKind[v1.PodTemplate]("PodTemplate", true, func(t *core.PodTemplate) field.ErrorList {
		return corevalidation.ValidatePodTemplate(t, podutil.GetValidationOptionsFromPodTemplate(&t.Template, nil))
	}, func(o *Objects) *[]*v1.PodTemplate { return &o.PodTemplates })
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
