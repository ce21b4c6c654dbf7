package input

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A dump taken while the scheduler binds pods: the claims say which pods
// it has placed, and where.
const bindingNodes = `
apiVersion: v1
kind: Node
metadata: {name: gpu-1}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-2}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
`

const bindingClaims = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: xr-abcde
  namespace: default
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: xr, uid: uid-xr, controller: true}]
spec: {devices: {requests: [{name: container-0-request-0, exactly: {deviceClassName: gpu.example.com}}]}}
status:
  allocation:
    devices: {results: [{request: container-0-request-0, driver: gpu.example.com, pool: gpu-1, device: gpu-0}]}
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [gpu-1]}]}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: own, namespace: default}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
status:
  allocation:
    devices: {results: [{request: gpu, driver: gpu.example.com, pool: gpu-2, device: gpu-0}]}
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [gpu-2]}]}]
  reservedFor: [{resource: pods, name: own, uid: uid-own}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: elsewhere, namespace: default}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
status:
  allocation:
    devices: {results: [{request: gpu, driver: gpu.example.com, pool: gone, device: gpu-0}]}
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [gone]}]}]
  reservedFor: [{resource: pods, name: lost, uid: uid-lost}]
`

const bindingPods = `
apiVersion: v1
kind: Pod
metadata: {name: xr, namespace: default, uid: uid-xr}
spec: {containers: [{name: main, image: app, resources: {limits: {example.com/gpu: "1"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: own, namespace: default, uid: uid-own}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: own}]
  containers: [{name: main, image: app, resources: {claims: [{name: gpu}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: nominated, namespace: default, uid: uid-nominated}
spec: {containers: [{name: main, image: app, resources: {limits: {example.com/gpu: "1"}}}]}
status:
  nominatedNodeName: gpu-2
  extendedResourceClaimStatus: {resourceClaimName: nominated-xyz, requestMappings: [{containerName: main, resourceName: example.com/gpu, requestName: container-0-request-0}]}
---
apiVersion: v1
kind: Pod
metadata: {name: lost, namespace: default, uid: uid-lost}
spec: {containers: [{name: main, image: app}]}
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: default, uid: uid-waiting}
spec: {containers: [{name: main, image: app, resources: {limits: {example.com/gpu: "1"}}}]}
`

// Pods being bound run where the scheduler binds them, as in the
// autoscaler's loop; only the pod nobody has placed is planned.
func TestPlaceBindingPods(t *testing.T) {
	check := func(t *testing.T, o *Objects) {
		t.Helper()
		var pending []string
		for _, p := range o.PendingPods {
			pending = append(pending, p.Name)
		}
		running := map[string]string{}
		for _, p := range o.RunningPods {
			running[p.Name] = p.Spec.NodeName
		}
		if !slices.Equal(pending, []string{"waiting"}) {
			t.Errorf("pending %v, want only [waiting]", pending)
		}
		want := map[string]string{"xr": "gpu-1", "own": "gpu-2", "nominated": "gpu-2"}
		if len(running) != len(want) {
			t.Errorf("running %v, want %v (lost: its node is not in the dump)", running, want)
		}
		for pod, node := range want {
			if running[pod] != node {
				t.Errorf("pod %s runs on %q, want %q", pod, running[pod], node)
			}
		}
	}
	t.Run("one file", func(t *testing.T) {
		check(t, mustParse(t, bindingNodes+"---"+bindingClaims+"---"+bindingPods))
	})
	t.Run("pods, claims and nodes in different files", func(t *testing.T) {
		dir := t.TempDir()
		for name, content := range map[string]string{"a-pods.yaml": bindingPods, "b-claims.yaml": bindingClaims, "c-nodes.yaml": bindingNodes} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		o, err := LoadPaths([]string{dir})
		if err != nil {
			t.Fatal(err)
		}
		check(t, o)
	})
}
