package doctor

import (
	"strings"
	"testing"
)

const podTemplateDoc = `---
apiVersion: v1
kind: PodTemplate
metadata: {name: train, namespace: ml}
template:
  spec:
    containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
`

func requestDoc(name, class, template string) string {
	return `---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: ` + name + `, namespace: ml}
spec:
  provisioningClassName: ` + class + `
  podSets: [{podTemplateRef: {name: ` + template + `}, count: 2}]
`
}

const kueueConfigDoc = `---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: gpus}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  managedResources: [nvidia.com/gpu]
`

func queuedJobDoc(name, resources string) string {
	return `---
apiVersion: batch/v1
kind: Job
metadata: {name: ` + name + `, namespace: ml, labels: {kueue.x-k8s.io/queue-name: gpus}}
spec:
  suspend: true
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers: [{name: c, image: busybox, resources: ` + resources + `}]
`
}

func TestProvisioningRequestChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  string
		want   []wantFinding
		inText []string
	}{
		{name: "served classes, templates present", input: podTemplateDoc + requestDoc("a", "check-capacity.autoscaling.x-k8s.io", "train") +
			requestDoc("b", "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "train") + requestDoc("c", "queued-provisioning.gke.io", "train")},
		{name: "missing template", input: podTemplateDoc + requestDoc("a", "check-capacity.autoscaling.x-k8s.io", "trian"),
			want:   []wantFinding{{CheckProvReqTemplateMissing, Warning, []string{"ProvisioningRequest/ml/a"}}},
			inText: []string{"spec.podSets[0].podTemplateRef.name: PodTemplate ml/trian not found"}},
		{name: "class typo", input: podTemplateDoc + requestDoc("a", "check-capacity.autoscaling.x-k8s.i0", "train"),
			want:   []wantFinding{{CheckProvReqClassUnserved, Warning, []string{"ProvisioningRequest/ml/a"}}},
			inText: []string{"did you mean check-capacity.autoscaling.x-k8s.io?"}},
		{name: "Kueue's managedResources miss a claims-only job", input: kueueConfigDoc + queuedJobDoc("train", "{claims: [{name: gpu}]}"),
			want:   []wantFinding{{CheckKueueManagedResources, Warning, []string{"ProvisioningRequestConfig/gpus", "Job/ml/train"}}},
			inText: []string{"managedResources [nvidia.com/gpu]"}},
		{name: "a job that asks a managed resource is asked for", input: kueueConfigDoc +
			queuedJobDoc("train", `{claims: [{name: gpu}], limits: {nvidia.com/gpu: "1"}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(load(t, tc.input))
			assertFindings(t, got, tc.want)
			for _, want := range tc.inText {
				if len(got) == 0 || !strings.Contains(got[0].Message+" "+got[0].Advice, want) {
					t.Errorf("finding %+v lacks %q", got, want)
				}
			}
		})
	}
}

// Devices that say what node CPU or memory their allocation takes
// (KEP-5517) are reported: draxr does not count it.
func TestNodeAllocatableResourcesReported(t *testing.T) {
	input := node("cpu-0", "") + `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: cpu-0-cpus}
spec:
  driver: cpu.example.com
  nodeName: cpu-0
  pool: {name: cpu-0, resourceSliceCount: 1}
  devices:
  - name: numa-0
    nodeAllocatableResources:
      cpu: {mapping: {deviceMultiplier: "8"}}
`
	got := Check(load(t, input))
	assertFindings(t, got, []wantFinding{{CheckNodeAllocatableIgnored, Warning, []string{"ResourceSlice/cpu-0-cpus"}}})
	if !strings.Contains(got[0].Message, "numa-0 (cpu)") {
		t.Errorf("message %q does not name the device and resource", got[0].Message)
	}
}

func TestDaemonSetClaimTemplateMissing(t *testing.T) {
	ds := `---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: validator, namespace: kube-system}
spec:
  selector: {matchLabels: {app: validator}}
  template:
    metadata: {labels: {app: validator}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
`
	got := Check(load(t, ds))
	assertFindings(t, got, []wantFinding{{CheckDaemonSetClaimTemplateMissing, Error, []string{"DaemonSet/kube-system/validator"}}})
	if !strings.Contains(got[0].Message, "resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate kube-system/one-gpu not found") {
		t.Errorf("message %q does not name the field and the template", got[0].Message)
	}
	tmpl := `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: kube-system}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}}
`
	if got := Check(load(t, gpuClass+ds+tmpl)); len(got) != 0 {
		t.Errorf("with the template: %+v", got)
	}
}
