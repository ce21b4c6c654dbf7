package input

import (
	"strings"
	"testing"
)

func capiDoc(kind, name, annotations, extra string) string {
	return "apiVersion: cluster.x-k8s.io/v1beta2\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  namespace: ns\n" + extra +
		"  annotations:\n    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"4\"\n" +
		"    capacity.cluster-autoscaler.kubernetes.io/cpu: \"8\"\n    capacity.cluster-autoscaler.kubernetes.io/memory: 16Gi\n" +
		annotations + "spec: {replicas: 0}\n"
}

// Cluster API objects are kept as read for the clusterapi provider (which
// makes them node groups); their annotations are checked on load.
func TestClusterAPIObjects(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    []string // Kind/name of the objects kept
		wantErr string
	}{
		{name: "scalable kinds, machines, infrastructure", src: capiDoc("MachineDeployment", "md", "    draxr.dev/template-resource-slices: '[{driver: d.example.com, devices: [{name: a}, {name: b}]}]'\n", "") +
			"---\n" + capiDoc("MachineSet", "ms", "", "") + "---\n" + capiDoc("MachinePool", "mp", "", "") +
			"---\napiVersion: cluster.x-k8s.io/v1beta1\nkind: Machine\nmetadata: {name: m, namespace: ns}\nspec: {providerID: 'x://1'}\n" +
			"---\napiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: DockerMachineTemplate\nmetadata: {name: t, namespace: ns}\n",
			want: []string{"MachineDeployment/md", "MachineSet/ms", "MachinePool/mp", "Machine/m", "DockerMachineTemplate/t"}},
		{name: "ConfigMap reference is read with the group", src: capiDoc("MachineSet", "ms", "    draxr.dev/template-resource-slices-configmap: tpl\n", "") +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: tpl, namespace: ns}\ndata: {resourceSlices: '[]'}\n",
			want: []string{"MachineSet/ms"}},
		{name: "bad ConfigMap reference", src: capiDoc("MachineSet", "ms", "    draxr.dev/template-resource-slices-configmap: Not_A_Name\n", ""),
			wantErr: "a.yaml: document 1: MachineSet ns/ms: annotation draxr.dev/template-resource-slices-configmap"},
		{name: "bad max size", src: strings.Replace(capiDoc("MachineSet", "ms", "", ""), `max-size: "4"`, `max-size: "four"`, 1),
			wantErr: "a.yaml: document 1: MachineSet ns/ms: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"},
		{name: "slice the API server would refuse", src: capiDoc("MachineSet", "ms", "    draxr.dev/template-resource-slices: '[{driver: d.example.com, devices: [{name: Bad_Name}]}]'\n", ""),
			wantErr: "a.yaml: document 1: MachineSet ns/ms: spec.resourceSlices[0].devices[0].name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse([]byte(tc.src), "a.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range objs.ClusterAPI {
				got = append(got, u.GetKind()+"/"+u.GetName())
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("Cluster API objects = %v, want %v", got, tc.want)
			}
			if len(objs.NodeGroups) != 0 {
				t.Errorf("NodeGroups = %d: Cluster API groups are the provider's to build", len(objs.NodeGroups))
			}
		})
	}
}

// What a `kubectl get -A -o yaml` of a running cluster holds beside what
// the planner reads is skipped and counted; a file of nothing readable is
// an error.
func TestKindsSkipped(t *testing.T) {
	src := "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns}\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\n---\n" +
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.example.com}\n---\n" +
		"apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: c, namespace: ns}\n---\n"
	objs, err := Parse([]byte(src+"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.ConfigMaps) != 1 || objs.Skipped["v1 Service"] != 1 || objs.Skipped["v1 Secret"] != 1 ||
		objs.Skipped["apiextensions.k8s.io/v1 CustomResourceDefinition"] != 1 || objs.Skipped["cluster.x-k8s.io/v1beta2 Cluster"] != 1 {
		t.Errorf("ConfigMaps %d, skipped %v", len(objs.ConfigMaps), objs.Skipped)
	}
	if got := objs.SkippedSummary(); got != "skipped 4 objects of kinds draxr does not read: apiextensions.k8s.io/v1 CustomResourceDefinition, cluster.x-k8s.io/v1beta2 Cluster, v1 Secret, v1 Service" {
		t.Errorf("summary = %q", got)
	}
	if _, err := Parse([]byte(src), "only.yaml"); err == nil || !strings.Contains(err.Error(), "only.yaml: nothing draxr reads") {
		t.Errorf("a file of skipped kinds only: error = %v, want \"only.yaml: nothing draxr reads\"", err)
	}
}
