package doctor

import (
	"strings"
	"testing"
)

func rackGroupDoc(labels string) string {
	return `---
apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: rack-a}
spec:
  minSize: 0
  maxSize: 4
  template:
    metadata: {labels: {` + labels + `}}
    status: {capacity: {cpu: "32", memory: 128Gi, pods: "110"}}
`
}

const rackPodGroupDoc = `---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
  schedulingConstraints: {topology: [{key: example.com/rack}]}
`

const tasJobDoc = `---
apiVersion: batch/v1
kind: Job
metadata: {name: tas, namespace: ml, labels: {kueue.x-k8s.io/queue-name: gpus}}
spec:
  suspend: true
  parallelism: 2
  template:
    metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: example.com/rack}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
`

func tasConfigDoc(mapping string) string {
	return `---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: gpus}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
` + mapping
}

// A topology key no node group template carries blocks the scale-ups of
// the gang or job that names it; a TAS job's key without Kueue's
// podSetUpdates mapping lets Kueue's second pass pick another domain.
func TestTopologyChecks(t *testing.T) {
	mapped := "  podSetUpdates: {nodeSelector: [{key: example.com/rack, valueFromProvisioningClassDetail: example.com/rack}]}\n"
	for _, tc := range []struct {
		name   string
		input  string
		want   []wantFinding
		inText []string
	}{
		{name: "the key on a group's template, mapped", input: rackGroupDoc("example.com/rack: a") + rackPodGroupDoc + tasJobDoc + tasConfigDoc(mapped)},
		{name: "PodGroup key on no template", input: rackGroupDoc("pool: gpu") + rackPodGroupDoc,
			want:   []wantFinding{{CheckTopologyKeyUnknown, Warning, []string{"PodGroup/ml/train"}}},
			inText: []string{`spec.schedulingConstraints.topology[0].key "example.com/rack" is a label no node group template carries`}},
		{name: "TAS job's key on no template", input: rackGroupDoc("pool: gpu") + tasJobDoc + tasConfigDoc(mapped),
			want:   []wantFinding{{CheckTopologyKeyUnknown, Warning, []string{"Job/ml/tas"}}},
			inText: []string{`annotation kueue.x-k8s.io/podset-required-topology "example.com/rack" is a label no node group template carries`}},
		{name: "no podSetUpdates mapping", input: rackGroupDoc("example.com/rack: a") + tasJobDoc + tasConfigDoc(""),
			want:   []wantFinding{{CheckKueueTopologyUnmapped, Warning, []string{"ProvisioningRequestConfig/gpus", "Job/ml/tas"}}},
			inText: []string{"{key: example.com/rack, valueFromProvisioningClassDetail: example.com/rack}"}},
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
