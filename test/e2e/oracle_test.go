package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"draxr.dev/draxr/simulator/placement"
)

// oracleScenario is one scenario the fidelity oracle replays.
type oracleScenario struct {
	name  string
	paths []string
	opts  oracleOptions
	// wantNewNodes, when set, is the node count the real scheduler needs,
	// reasoned by hand: the oracle alone cannot see a plan that asks for
	// nodes no pod needs when it also creates the pods that ask for them
	// (a workload counted twice).
	wantNewNodes *int
	wantPerGroup map[string]int // new nodes per group, where it matters
	wantLeftOut  int            // pods the plan must leave without a node
	wantNodeName []string       // planned node names that must appear
	// gates are feature gates turned on for the plan and the replay's
	// scheduler.
	gates []string
	// bindingDriver: a driver sets the devices' binding conditions once
	// the scheduler allocated them (KEP-5007).
	bindingDriver bool
	// wantFewerPending, when set, is how many placed pods the replay with
	// one node fewer must leave pending (a gang: all of them).
	wantFewerPending int
	// Where kube-scheduler's scores tie between nodes holding different
	// pods, it picks one at random, and a plan cannot (plans repeat): one
	// live run packs tighter than the plan, another looser. tiePending is
	// how many placed pods such a run may leave pending on the planned
	// nodes; tieSlack how many nodes the plan may hold over what a run
	// needs (the minimality replay leaves 1+tieSlack nodes out). Both are
	// 0 but where ties were seen to decide, with the runs measured.
	tiePending, tieSlack int
}

// Golden scenarios whose pods are meant never to bind: the oracle's
// question (does every placed pod bind?) has no subject there.
var oracleSkipsGolden = map[string]string{
	// 33 devices in one extended-resource claim: the scheduler errors on
	// the pod and retries it forever; the plan places nothing.
	"claim-limit-33-devices": "the pod is never placeable by design",
	// The class's CEL does not compile; no pod of that class ever binds.
	"broken-cel-device-class": "the device class is broken by design",
}

func oracleScenarios(t *testing.T) []oracleScenario {
	t.Helper()
	out := []oracleScenario{{name: "readme-example", paths: []string{filepath.Join(root, "simulator/examples/builtin.yaml")}}}
	golden := filepath.Join(root, "simulator/offline/testdata/scenarios")
	dirs, err := os.ReadDir(golden)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, skip := oracleSkipsGolden[d.Name()]; skip || !d.IsDir() {
			continue
		}
		opts, err := loadOracleOptions(filepath.Join(golden, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, oracleScenario{name: "golden/" + d.Name(), opts: opts,
			paths: []string{filepath.Join(golden, d.Name(), "input")}})
	}
	shapes := filepath.Join(root, "test/e2e/testdata/fidelity")
	shape := func(name string, s oracleScenario) oracleScenario {
		s.name, s.paths = name, []string{filepath.Join(shapes, name)}
		return s
	}
	out = append(out,
		// The DaemonSet pod (one GPU) leaves 3 of 4 GPUs per node for 7 pods.
		shape("daemonset-gpu-per-node", oracleScenario{wantNewNodes: ptrInt(3)}),
		// Partition pods spread over the new nodes, each blocking a GPU.
		shape("partition-pods-first", oracleScenario{wantNewNodes: ptrInt(3)}),
		// 4 x 40Gi + 4 x 20Gi shares of one 80Gi device per node.
		shape("consumable-capacity-shares", oracleScenario{wantNewNodes: ptrInt(3)}),
		// One node for the two pods the scheduler tries; the gated pod and
		// the other scheduler's pod get none.
		shape("gated-and-other-scheduler", oracleScenario{wantNewNodes: ptrInt(1), wantLeftOut: 2}),
		// A Deployment, its ReplicaSet and its running pods: nothing to do.
		shape("deployment-replicaset-running", oracleScenario{wantNewNodes: ptrInt(0)}),
		// The live node gpu-new-0 takes 8 pods; the new node is gpu-new-1.
		shape("live-node-named-like-new-node", oracleScenario{wantNewNodes: ptrInt(1), wantNodeName: []string{"gpu-new-1"}}),
		// Written afresh as users would, each with the count reasoned in
		// its header comment.
		// The agent (2 CPU) runs on GPU nodes only: 3 GPU + 2 CPU nodes.
		shape("daemonset-selects-one-group", oracleScenario{wantNewNodes: ptrInt(5), wantPerGroup: map[string]int{"gpu": 3, "cpu": 2}}),
		// Slice and whole-GPU pods interleaved: 3 nodes.
		shape("partitions-interleaved", oracleScenario{wantNewNodes: ptrInt(3)}),
		// 48Gi, 24Gi and default (12Gi) shares of a 96Gi device: 3 nodes.
		shape("consumable-three-share-sizes", oracleScenario{wantNewNodes: ptrInt(3)}),
		// Rollout with 2 running, 3 pending, 1 not yet made: 2 nodes.
		shape("deployment-partly-running", oracleScenario{wantNewNodes: ptrInt(2)}),
		// The tainted GPU only takes the pods that tolerate it: 2 nodes.
		shape("device-taints-tolerated", oracleScenario{wantNewNodes: ptrInt(2)}),
		// 3 replicas per zone, 2 nodes per zone.
		shape("zone-spread-two-groups", oracleScenario{wantNewNodes: ptrInt(4), wantPerGroup: map[string]int{"gpu-zone-a": 2, "gpu-zone-b": 2}}),
		// 2 pods on the live H100s, 3 fall back to 2 A100s each: 2 nodes.
		shape("first-available-fallback", oracleScenario{wantNewNodes: ptrInt(2)}),
		// Zone affinity and one trainer per node: 4 zone-a nodes.
		shape("pod-affinity-zone", oracleScenario{wantNewNodes: ptrInt(4), wantPerGroup: map[string]int{"gpu-a": 4}}),
		// Shared claim's pods on one node, template pods on another.
		shape("shared-claim-and-template", oracleScenario{wantNewNodes: ptrInt(2)}),
		// The evaluators first: scoring spreads them, the shared claim
		// needs a third node (a planner bug this oracle found).
		shape("template-claims-before-shared-claim", oracleScenario{wantNewNodes: ptrInt(3)}),
		// The fabric pool is used up: 2 pods left out, 2 nodes for the rest.
		shape("shared-pool-exhausted", oracleScenario{wantNewNodes: ptrInt(2), wantLeftOut: 2}),
		// Both groups can grow; the pods' first choice (H100) decides,
		// whatever least-waste would pick.
		shape("first-choice-across-groups", oracleScenario{wantNewNodes: ptrInt(2), wantPerGroup: map[string]int{"h100": 2}}),
		// The agent's claim template takes a GPU per node: 3 nodes.
		shape("daemonset-claim-template", oracleScenario{wantNewNodes: ptrInt(3)}),
		// The monitor's admin-access claim takes no GPU: 2 nodes.
		shape("daemonset-admin-access", oracleScenario{wantNewNodes: ptrInt(2)}),
		// Fabric GPUs bind once attached (binding conditions): the plan's
		// 2 nodes take the 12 pods once the driver attaches the devices.
		shape("binding-conditions-fabric", oracleScenario{wantNewNodes: ptrInt(2), bindingDriver: true}),
		// Two 4-core pods spread over two 8-core nodes, the 8-core pod
		// after them needs a third (packed first fit, 2 would do).
		shape("mixed-sizes-spread", oracleScenario{wantNewNodes: ptrInt(3), wantFewerPending: 1}),
		// Gangs, with the scheduler's gang plugin: 12 one-GPU pods of
		// minCount 12 need 2 nodes, and with one the whole gang waits.
		shape("gang-two-nodes", oracleScenario{wantNewNodes: ptrInt(2), gates: []string{"GenericWorkload"}, wantFewerPending: 12}),
		// 4 of them fit a live node: one new node, and without it none of
		// the 12 binds.
		shape("gang-with-live-room", oracleScenario{wantNewNodes: ptrInt(1), gates: []string{"GenericWorkload"}, wantFewerPending: 12}),
		// Workers on a GPU node and a launcher on a CPU node, one gang:
		// both groups grow, and without the CPU node none of the 9 binds.
		shape("gang-across-groups", oracleScenario{wantNewNodes: ptrInt(2), wantPerGroup: map[string]int{"h100": 1, "cpu": 1},
			gates: []string{"GenericWorkload"}, wantFewerPending: 9}),
		// The gang shares the cluster's one fabric channel through its
		// PodGroup's claim: one claim for the 12, 6 nodes, and with 5
		// none binds.
		shape("gang-group-claim", oracleScenario{wantNewNodes: ptrInt(6),
			gates: []string{"GenericWorkload", "DRAWorkloadResourceClaims"}, wantFewerPending: 12}),
	)
	// Karpenter's benchmark shape at 200 pods over 400 instance-type
	// groups (issue 56): pods of many sizes, with zone and host spread,
	// zone affinity and host anti-affinity. The scheduler spreads them
	// over the new nodes (least allocated), so the plan places them as it
	// does, not packed first fit (which planned 57 nodes, on which 7 pods
	// stayed pending). Scores tie between nodes holding different pods and
	// the scheduler picks among them at random: measured, the plan's 50
	// fake-it-4 nodes bound all 200 pods in 11 of 14 runs (199 in the
	// others) and 46 left 3 or 4 pending in all 14; before least-waste
	// compared scored counts, the plan's 67 fake-it-3 nodes bound all
	// 200 in 57 of 58 runs (docs/performance.md, "New nodes placed as the
	// scheduler spreads them").
	out = append(out, oracleScenario{name: "many-groups-200", paths: []string{manyGroupsScenario(t, 200)}, tiePending: 2, tieSlack: 3})
	return out
}

func ptrInt(n int) *int { return &n }

// TestFidelityOracle replays every scenario on a real control plane with
// draxr-scheduler (make fidelity runs only this test; make test runs it
// with the rest): every pod the plan places binds, every pod it leaves
// out stays pending, and with one node fewer some placed pod is
// unschedulable. Placements that differ (ties the scheduler breaks
// otherwise) are reported, not failed.
func TestFidelityOracle(t *testing.T) {
	// The plans replayed take every shortcut's full path too and stop on
	// any difference (docs/shortcuts.md).
	t.Setenv(placement.VerifyShortcutsEnv, "1")
	o := newOracle(t)
	for _, sc := range oracleScenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			o.t = t
			// A scenario that stopped half-built must not leak into the next.
			t.Cleanup(func() {
				if t.Failed() {
					t.Log(o.cp.Logs())
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					o.cleanup(ctx)
				}
			})
			o.schedOpts.Args, o.bindingDriver = nil, sc.bindingDriver
			for _, gate := range sc.gates {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(gate), true)
				o.schedOpts.Args = append(o.schedOpts.Args, "--feature-gates="+gate+"=true")
			}
			rep := o.check(sc.paths, sc.opts, 1+sc.tieSlack)
			fmt.Println(rep.line(sc.name))
			for _, d := range rep.Differ {
				t.Logf("placement differs: %s", d)
			}
			if len(rep.Unbound) > sc.tiePending {
				t.Errorf("planned new nodes %v, but the scheduler left pending %v:\n%s\n--- draxr-scheduler log (tail) ---\n%s",
					rep.NewNodes, rep.Unbound, strings.Join(rep.UnboundWhy, "\n"), rep.SchedulerLog)
			}
			if len(rep.LeftOutBound) > 0 {
				t.Errorf("the plan leaves out %v, but the scheduler bound %v", rep.LeftOut, rep.LeftOutBound)
			}
			if len(rep.NewNodes) > 0 && rep.FewerPending == 0 {
				t.Errorf("with %d %s node(s) fewer than planned (%v), every placed pod still binds: the plan is not minimal (unsettled: %v)",
					rep.FewerBy, rep.FewerGroup, rep.NewNodes, rep.FewerUnsettled)
			}
			if sc.wantFewerPending > 0 && rep.FewerPending != sc.wantFewerPending {
				t.Errorf("with one node fewer %d placed pods stay pending, want %d (unsettled: %v)", rep.FewerPending, sc.wantFewerPending, rep.FewerUnsettled)
			}
			if sc.wantNewNodes != nil && len(rep.NewNodes) != *sc.wantNewNodes {
				t.Errorf("planned new nodes %v, want %d", rep.NewNodes, *sc.wantNewNodes)
			}
			if len(rep.LeftOut) != sc.wantLeftOut && (sc.wantLeftOut > 0 || sc.wantNewNodes != nil) {
				t.Errorf("plan leaves out %v, want %d pods", rep.LeftOut, sc.wantLeftOut)
			}
			for group, n := range sc.wantPerGroup {
				if rep.PerGroup[group] != n {
					t.Errorf("planned new nodes %v, want %d in group %s", rep.NewNodes, n, group)
				}
			}
			for _, name := range sc.wantNodeName {
				if !slices.Contains(rep.NewNodes, name) {
					t.Errorf("planned new nodes %v, want %s among them", rep.NewNodes, name)
				}
			}
		})
	}
}
