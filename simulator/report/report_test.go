package report

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/scaleup"
)

func pod(name string) scaleup.PodRef { return scaleup.PodRef{Namespace: "ml", Name: name} }

// groups is a DRA group and a group that offers nothing extended.
func groups() []scaleup.GroupState {
	return []scaleup.GroupState{
		{Name: "cpu", MinSize: 1, MaxSize: 10, CurrentNodes: 1},
		{Name: "gpu", MaxSize: 4, CurrentNodes: 1, NewNodes: 1, Template: []dynres.Entry{
			{Resource: "deviceclass.resource.kubernetes.io/gpu.example.com", Source: dynres.DRA, Class: "gpu.example.com", Offered: 8},
			{Resource: "example.com/gpu", Source: dynres.DRA, Class: "gpu.example.com", Offered: 8}}},
	}
}

const groupsTable = `NODE GROUPS
NAME  MIN  MAX  CURRENT  NEW  A NEW NODE OFFERS
cpu   1    10   1        +0   no extended resources
gpu   0    4    1        +1   deviceclass.resource.kubernetes.io/gpu.example.com: 8 (DRA, DeviceClass gpu.example.com)
                              example.com/gpu: 8 (DRA, DeviceClass gpu.example.com)
`

// nothingPending is a plan's sections after its groups when no pod is
// pending.
const nothingPending = `
SCALE-UP
none

PLACEMENTS
POD  NODE  DEVICES

NO SCALE-UP
every pending pod is placed
`

// A plan reads as sections a person scans: the groups and what a new
// node offers, the scale-ups, each pod's node and devices, and why every
// other pod gets nothing; the sections for requests, buffers, scale-down,
// feature gates and warnings only when there is something to say.
func TestPlanTable(t *testing.T) {
	tests := []struct {
		name string
		out  SimulateOutput
		want string
	}{
		{name: "nothing pending", out: SimulateOutput{Plan: &scaleup.Plan{Groups: groups()[:1]}}, want: `NODE GROUPS
NAME  MIN  MAX  CURRENT  NEW  A NEW NODE OFFERS
cpu   1    10   1        +0   no extended resources
` + nothingPending},
		{name: "a scale-up, a gang, placements and a pod left out", out: SimulateOutput{Plan: &scaleup.Plan{Groups: groups(),
			ScaleUps: []scaleup.ScaleUp{
				{NodeGroup: "gpu", NewNodes: 1, Pods: []scaleup.PodRef{pod("b")},
					Placements: []scaleup.Placement{{Pod: pod("b"), Node: "gpu-new-1", Devices: []string{"gpu.example.com/gpu-new-1/gpu-0"}}}},
				{NodeGroup: "gpu", NewNodes: 2, Pods: []scaleup.PodRef{pod("g-0"), pod("g-1")}, Gang: "ml/train"}},
			ExistingNodes: []scaleup.Placement{{Pod: pod("a"), Node: "cpu-0"}},
			NoScaleUp:     []scaleup.NoScaleUp{{Pod: pod("giant"), Reason: "needs 9 example.com/gpu"}}}},
			want: groupsTable + `
SCALE-UP
NODE GROUP  NEW NODES  PODS HELPED
gpu         +1         1
gpu         +2         2 (gang ml/train, asked all at once)

PLACEMENTS
POD   NODE              DEVICES
ml/a  cpu-0 (existing)  -
ml/b  gpu-new-1 (new)   gpu.example.com/gpu-new-1/gpu-0

NO SCALE-UP
POD       REASON
ml/giant  needs 9 example.com/gpu
`},
		{name: "requests, buffers, scale-down, gates and warnings", out: SimulateOutput{Plan: &scaleup.Plan{},
			ProvisioningRequests: []provreq.Report{
				{Namespace: "ml", Name: "train", ProvisioningClassName: provreq.BestEffortAtomic,
					Condition: provreq.ReportCondition{Type: "Provisioned", Status: "True", Reason: "CapacityIsProvisioned", Message: "16 pods on new nodes"},
					ScaleUp:   []provreq.ReportScaleUp{{NodeGroup: "gpu", NewNodes: 2}}},
				{Namespace: "ml", Name: "check", ProvisioningClassName: provreq.CheckCapacity,
					Condition: provreq.ReportCondition{Type: "Provisioned", Status: "False", Reason: "CapacityIsNotFound"}}},
			CapacityBuffers: []capacitybuffer.Report{
				{Namespace: "ml", Name: "warm", Replicas: 3, Condition: capacitybuffer.ReportCondition{Type: "Provisioning", Status: "True", Reason: "Ok"},
					KeptOnExistingNodes: 1, OnNewNodes: map[string]int{"gpu": 1, "cpu": 1}},
				{Namespace: "ml", Name: "cold", Replicas: 1, Condition: capacitybuffer.ReportCondition{Type: "ReadyForProvisioning", Status: "False",
					Reason: "Invalid", Message: "no template"}, NoRoom: 1, Reason: "no group fits"}},
			ScaleDown: []scaledown.NodeVerdict{{Node: "cpu-0", NodeGroup: "cpu", Verdict: scaledown.Kept, Code: "NodeGroupMinSizeReached", Reason: "at min size 1"},
				{Node: "gpu-0", NodeGroup: "gpu", Verdict: scaledown.Removable, Reason: "unneeded"}},
			FeatureGates: map[string]bool{"Zeta": true, "Alpha": false},
			ClassErrors:  []string{"DeviceClass bad: selector does not compile"},
			Warnings:     []string{"3 ResourceSlices carry nodeAllocatableResources"}},
			want: `NODE GROUPS
NAME  MIN  MAX  CURRENT  NEW  A NEW NODE OFFERS
` + nothingPending + `
PROVISIONING REQUESTS
REQUEST   CLASS                                             CONDITION                               SCALE-UP  MESSAGE
ml/train  best-effort-atomic-scale-up.autoscaling.x-k8s.io  Provisioned=True CapacityIsProvisioned  gpu +2    16 pods on new nodes
ml/check  check-capacity.autoscaling.x-k8s.io               Provisioned=False CapacityIsNotFound    -` + "         " /* no message */ + `

CAPACITY BUFFERS
BUFFER   REPLICAS  CONDITION                                         ON EXISTING NODES  ON NEW NODES    NO ROOM
ml/warm  3         Provisioning=True Ok                              1                  cpu: 1, gpu: 1  -
ml/cold  1         ReadyForProvisioning=False Invalid (no template)  0                  -               1: no group fits

SCALE-DOWN
NODE   NODE GROUP  VERDICT    REASON
cpu-0  cpu         Kept       NodeGroupMinSizeReached: at min size 1
gpu-0  gpu         Removable  unneeded

feature gates: Alpha=false,Zeta=true (the scheduler must run with the same)

warning: DeviceClass bad: selector does not compile

warning: 3 ResourceSlices carry nodeAllocatableResources
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PlanTable(&b, tt.out); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tt.want {
				t.Errorf("table:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// Write prints the output in the format asked for, says what it is
// (apiVersion and kind), and quotes messages as written; a format it does
// not know is an error naming those it does.
func TestWrite(t *testing.T) {
	out := NewSimulateOutput(&scaleup.Plan{NoScaleUp: []scaleup.NoScaleUp{{Pod: pod("a"), Reason: "selector <input>:1:17 a && b"}}}, nil)
	tests := []struct {
		format  string
		want    []string
		wantErr string
	}{
		{format: "", want: []string{"the table"}},
		{format: "table", want: []string{"the table"}},
		{format: "json", want: []string{`"apiVersion": "draxr.dev/v1alpha1"`, `"kind": "Plan"`, `"reason": "selector <input>:1:17 a && b"`}},
		{format: "yaml", want: []string{"apiVersion: draxr.dev/v1alpha1", "kind: Plan", "reason: selector <input>:1:17 a && b"}},
		{format: "xml", wantErr: `-o: unknown output format "xml" (want one of table, json, yaml)`},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			err := Write(&b, tt.format, out, func(w io.Writer) error {
				_, err := io.WriteString(w, "the table")
				return err
			})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	if err := Write(io.Discard, "table", out, func(io.Writer) error { return errors.New("boom") }); err == nil || err.Error() != "boom" {
		t.Errorf("a table's error %v, want it returned", err)
	}
}

// The capacity report: every class and extended resource with its count
// by group or node; partition profiles, counters and shared devices only
// where the hardware has them.
func TestCapacityTable(t *testing.T) {
	plain := capacity.Report{
		Classes: []capacity.Row{{Name: "gpu.example.com", Total: 16, Allocated: 3, Free: 12, Tainted: 1,
			Groups: []capacity.Part{{Name: "gpu", Total: 16, Free: 12}}}},
		Resources: []capacity.Row{{Name: "example.com/gpu", Source: dynres.DRA, Class: "gpu.example.com", Total: 16, Allocated: 3, Free: 12, Tainted: 1,
			Nodes: []capacity.Part{{Name: "gpu-0", Total: 8, Free: 5}, {Name: "gpu-1", Total: 8, Free: 7}}}},
	}
	partitioned := plain
	partitioned.Classes = []capacity.Row{{Name: "mig.nvidia.com", Total: 1, Free: 0,
		Partitions: []devicepools.Partition{{Profile: "1g.10gb", Total: 7, Free: 6}}}}
	partitioned.Counters = []devicepools.CounterUsage{{Driver: "gpu.nvidia.com", Counter: "memory",
		Total: resource.MustParse("80Gi"), Consumed: resource.MustParse("10Gi"), Free: resource.MustParse("70Gi")}}
	partitioned.SharedDevices = []capacity.SharedDevice{{Node: "gpu-0", Driver: "gpu.example.com", Pool: "gpu-0", Device: "gpu-1", Shares: 2, Use: 0.5,
		Capacity: []capacity.SharedCapacity{{Name: "memory", Total: "80Gi", Consumed: "40Gi", Free: "40Gi"}}}}
	tests := []struct {
		name   string
		report capacity.Report
		want   string
	}{
		{name: "plain devices", report: plain, want: `DEVICE CLASS     TOTAL  ALLOCATED  FREE  TAINTED  BY NODE GROUP
gpu.example.com  16     3          12    1        gpu 12/16 free

EXTENDED RESOURCE  SOURCE                 TOTAL  ALLOCATED  FREE  TAINTED  BY NODE
example.com/gpu    DRA (gpu.example.com)  16     3          12    1        gpu-0 5/8 free, gpu-1 7/8 free
`},
		{name: "partitioned and shared", report: partitioned, want: `DEVICE CLASS    TOTAL  ALLOCATED  FREE  TAINTED  BY NODE GROUP
mig.nvidia.com  1      0          0     0` + "        " /* no node group */ + `

EXTENDED RESOURCE  SOURCE                 TOTAL  ALLOCATED  FREE  TAINTED  BY NODE
example.com/gpu    DRA (gpu.example.com)  16     3          12    1        gpu-0 5/8 free, gpu-1 7/8 free

DEVICE CLASS    PARTITION PROFILE  AT MOST  FREE
mig.nvidia.com  1g.10gb            7        6

DRIVER          COUNTER  TOTAL  CONSUMED  FREE
gpu.nvidia.com  memory   80Gi   10Gi      70Gi

SHARED DEVICE                NODE   SHARES  IN USE  CAPACITY (CONSUMED/TOTAL, FREE)
gpu.example.com/gpu-0/gpu-1  gpu-0  2       50%     memory 40Gi/80Gi, 40Gi free
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := CapacityTable(&b, &tt.report); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tt.want {
				t.Errorf("table:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
