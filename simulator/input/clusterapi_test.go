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

func TestClusterAPIGroups(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		want      []string // group names
		wantSlice int      // devices of the first group
		wantErr   string
	}{
		{name: "all three kinds", src: capiDoc("MachineDeployment", "md", "    draxr.dev/template-resource-slices: '[{driver: d.example.com, devices: [{name: a}, {name: b}]}]'\n", "") +
			"---\n" + capiDoc("MachineSet", "ms", "", "") + "---\n" + capiDoc("MachinePool", "mp", "", ""),
			want: []string{"MachineDeployment/ns/md", "MachineSet/ns/ms", "MachinePool/ns/mp"}, wantSlice: 2},
		{name: "a MachineSet of a MachineDeployment is not a group",
			src:  capiDoc("MachineSet", "ms", "", "  ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta2, kind: MachineDeployment, name: md, uid: u}]\n"),
			want: nil},
		{name: "ConfigMap reference", src: capiDoc("MachineSet", "ms", "    draxr.dev/template-resource-slices-configmap: tpl\n", ""),
			wantErr: "a.yaml: document 1: MachineSet ns/ms: annotation draxr.dev/template-resource-slices-configmap: draxr simulate does not read ConfigMaps"},
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
			for _, g := range objs.NodeGroups {
				got = append(got, g.Name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("groups = %v, want %v", got, tc.want)
			}
			if tc.wantSlice > 0 && len(objs.NodeGroups[0].Spec.ResourceSlices[0].Devices) != tc.wantSlice {
				t.Errorf("devices = %d", len(objs.NodeGroups[0].Spec.ResourceSlices[0].Devices))
			}
		})
	}
}
