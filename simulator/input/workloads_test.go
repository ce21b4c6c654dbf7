package input

import (
	"fmt"
	"regexp"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const podTemplate = `
    metadata: {labels: {app: w}}
    spec:
      restartPolicy: %s
      containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]`

func TestWorkloadsExpand(t *testing.T) {
	tests := []struct {
		name, src string
		names     string // regexp every pod name must match
		want      int
	}{
		{"Deployment", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  replicas: 3
  selector: {matchLabels: {app: w}}
  template:` + sprintfTemplate("Always"), `^web-[bcdfghjklmnpqrstvwxz2456789]{5}$`, 3},
		{"Deployment default replicas", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: w}}
  template:` + sprintfTemplate("Always"), `^web-.{5}$`, 1},
		{"ReplicaSet", `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 2
  selector: {matchLabels: {app: w}}
  template:` + sprintfTemplate("Always"), `^rs-.{5}$`, 2},
		{"StatefulSet", `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: w}}
  template:` + sprintfTemplate("Always"), `^db-[01]$`, 2},
		{"Job parallelism capped by completions", `apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 4
  completions: 2
  template:` + sprintfTemplate("Never"), `^train-.{5}$`, 2},
		{"Indexed Job", `apiVersion: batch/v1
kind: Job
metadata: {name: idx}
spec:
  parallelism: 3
  completionMode: Indexed
  completions: 5
  template:` + sprintfTemplate("OnFailure"), `^idx-[0-2]-.{5}$`, 3},
		{"suspended Job", `apiVersion: batch/v1
kind: Job
metadata: {name: later}
spec:
  suspend: true
  template:` + sprintfTemplate("Never"), `^$`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustParse(t, tt.src)
			if len(o.PendingPods) != tt.want {
				t.Fatalf("got %d pods, want %d", len(o.PendingPods), tt.want)
			}
			seen := map[string]bool{}
			for _, pod := range o.PendingPods {
				if !regexp.MustCompile(tt.names).MatchString(pod.Name) || seen[pod.Name] {
					t.Errorf("pod name %q: want unique names matching %s", pod.Name, tt.names)
				}
				seen[pod.Name] = true
				checkExpandedPod(t, pod)
			}
		})
	}
}

func checkExpandedPod(t *testing.T, pod *v1.Pod) {
	t.Helper()
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.UID == "" || pod.UID == "" || pod.Labels["app"] != "w" {
		t.Errorf("pod %s: owner %+v, uid %q, labels %v", pod.Name, ref, pod.UID, pod.Labels)
	}
	if q := pod.Spec.Containers[0].Resources.Requests["example.com/gpu"]; q.String() != "1" {
		t.Errorf("pod %s: requests not defaulted from limits: %v", pod.Name, pod.Spec.Containers[0].Resources)
	}
}

func sprintfTemplate(restart string) string { return fmt.Sprintf(podTemplate, restart) }

func TestWorkloadNamesStable(t *testing.T) {
	src := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 500
  selector: {matchLabels: {app: w}}
  template:` + sprintfTemplate("Always")
	a, b := mustParse(t, src), mustParse(t, src)
	for i := range a.PendingPods {
		if a.PendingPods[i].Name != b.PendingPods[i].Name || a.PendingPods[i].UID != b.PendingPods[i].UID {
			t.Fatalf("pod %d differs between loads: %s vs %s", i, a.PendingPods[i].Name, b.PendingPods[i].Name)
		}
	}
}
