package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/simulator/daemonsets"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/test/controlplane"
)

// The fidelity oracle plans a scenario (a cluster dump and NodeGroups)
// with the scheduler's own configuration, then builds it on a real control
// plane with draxr-scheduler: the existing objects, the planned new nodes
// shaped from their group templates, the DaemonSet pods of those nodes and
// then the pending pods. A plan is right when every pod it places binds,
// every pod it leaves out stays pending, and one node fewer leaves some
// pod unschedulable (the plan is minimal); on shapes where ties the
// scheduler breaks at random decide, within the bounds the scenario
// states (oracleScenario.tiePending, tieSlack).

// oracleOptions are the planner flags a scenario runs with (the golden
// scenarios' options.yaml).
type oracleOptions struct {
	Expander           string              `json:"expander,omitempty"`
	ExpanderPriorities map[string][]string `json:"expanderPriorities,omitempty"`
	MaxNodesTotal      int                 `json:"maxNodesTotal,omitempty"`
}

// oracleReport is what a user of the oracle reads.
type oracleReport struct {
	NewNodes []string       // planned new nodes, as named by the plan
	PerGroup map[string]int // planned new nodes per group
	Placed   int            // pods the plan places (existing and new nodes)
	Bound    int            // of those, bound by the scheduler
	Unbound  []string       // placed by the plan, left pending by the scheduler
	// UnboundWhy has each unbound pod's conditions, for the failure.
	UnboundWhy []string
	LeftOut    []string // pods the plan gives no node
	// LeftOutBound are pods the plan leaves out that the scheduler bound.
	LeftOutBound []string
	Differ       []string // "ns/pod: planned node-a, bound node-b"
	// SchedulerLog is the scheduler's log tail when some pod was unbound.
	SchedulerLog string
	// FewerGroup lost its last FewerBy planned nodes in the second run
	// ("" when nothing was planned); FewerPending counts the placed pods
	// the scheduler then reported unschedulable, FewerUnsettled those it
	// did neither bind nor report.
	FewerGroup     string
	FewerBy        int
	FewerPending   int
	FewerUnsettled []string
}

func (r *oracleReport) line(scenario string) string {
	fewer := "-"
	if r.FewerGroup != "" {
		fewer = fmt.Sprint(r.FewerPending)
	}
	return fmt.Sprintf("fidelity %s: planned %d new nodes, %d/%d pods bound, with %d fewer: %s pending, %d placements differ",
		scenario, len(r.NewNodes), r.Bound, r.Placed, r.FewerBy, fewer, len(r.Differ))
}

// oracle builds scenarios on its own control plane: scenarios bring
// their own DeviceClasses, driver and node names, which must meet no
// other test's nodes or classes.
//
// Each replay runs its own draxr-scheduler, started once the replay's
// nodes and slices exist and stopped before they are deleted. Replays
// reuse node, pool and device names (every scenario's new nodes are
// <group>-new-<n> with the same devices), and a scheduler kept across
// them carried one replay into the next: a binding cycle still running
// when its pod and claims were deleted (the upstream PreBind waits up to
// 120 s for an extended-resource claim that no longer exists to reach its
// cache) held its devices as in-flight allocations, so pods of the next
// replay found those devices taken and were marked unschedulable; the
// release is no cluster event, so nothing retried them for 5 minutes.
type oracle struct {
	t          *testing.T
	cp         *controlplane.ControlPlane
	schedOpts  controlplane.SchedulerOptions
	stopSched  func() // stops the running replay's scheduler; nil if none
	profile    string // scheduler configuration file
	settle     time.Duration
	lastSchLog string // the last replay's scheduler log tail, for failures
	// bindingDriver sets the binding conditions of allocated devices, as
	// their driver would (driveBindingConditions).
	bindingDriver bool
}

// newOracle starts a control plane with draxr-scheduler for the oracle;
// the test's cleanup stops every process it started.
func newOracle(t *testing.T) *oracle {
	t.Helper()
	skipUnderShort(t)
	binDir, err := controlplane.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The Workload API is served for the gang scenarios, with PodGroup
	// claims, which the resourceclaim controller makes.
	ocp, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir, APIServerArgs: []string{
		"--feature-gates=GenericWorkload=true,DRAWorkloadResourceClaims=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"},
		ControllerManagerArgs: []string{"--feature-gates=GenericWorkload=true,DRAWorkloadResourceClaims=true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ocp.Stop)
	opts := schedulerOptions("")
	// The scheduler binds within seconds; the bound is for a loaded machine.
	return &oracle{t: t, cp: ocp, schedOpts: opts, profile: opts.Config, settle: 45 * time.Second}
}

// startScheduler starts the replay's scheduler. The nodes and slices are
// in its first list, so it never sees a pod before them.
func (o *oracle) startScheduler(ctx context.Context) {
	o.t.Helper()
	stop, err := o.cp.StartScheduler(ctx, o.schedOpts)
	if err != nil {
		o.t.Fatal(err)
	}
	o.stopSched = stop
}

// stopScheduler stops the replay's scheduler (and every binding cycle it
// was in) and keeps its log's tail.
func (o *oracle) stopScheduler() {
	if o.stopSched == nil {
		return
	}
	o.stopSched()
	o.stopSched = nil
	if data, err := os.ReadFile(filepath.Join(o.cp.Dir, o.schedOpts.Name+".log")); err == nil {
		o.lastSchLog = string(data[max(len(data)-6000, 0):])
	}
}

// plan loads a scenario and plans it as `draxr simulate` would with the
// scheduler's configuration.
func (o *oracle) plan(ctx context.Context, paths []string, opts oracleOptions) (*input.Objects, *offline.Result, error) {
	objs, err := input.LoadPaths(paths)
	if err != nil {
		return nil, nil, err
	}
	profile, err := placement.LoadProfile(o.profile, "")
	if err != nil {
		return nil, nil, err
	}
	simOpts := offline.Options{Profile: profile, MaxNodesTotal: opts.MaxNodesTotal,
		Requests: provisioning.OfflineStep("", provisioning.DefaultInitialBackoff)}
	if opts.Expander != "" {
		var priorities []byte
		if opts.ExpanderPriorities != nil {
			if priorities, err = yaml.Marshal(opts.ExpanderPriorities); err != nil {
				return nil, nil, err
			}
		}
		if simOpts.Expander, err = expander.New(opts.Expander, priorities, 0); err != nil {
			return nil, nil, err
		}
	}
	res, err := offline.Simulate(ctx, objs, simOpts)
	return objs, res, err
}

// loadOracleOptions reads options.yaml beside a scenario's input folder;
// a scenario without one runs with the defaults.
func loadOracleOptions(dir string) (oracleOptions, error) {
	var opts oracleOptions
	data, err := os.ReadFile(filepath.Join(dir, "options.yaml"))
	if os.IsNotExist(err) {
		return opts, nil
	}
	if err != nil {
		return opts, err
	}
	if err := yaml.UnmarshalStrict(data, &opts); err != nil {
		return opts, fmt.Errorf("%s: %w", filepath.Join(dir, "options.yaml"), err)
	}
	return opts, nil
}

// check plans the scenario and replays it twice: with the planned nodes,
// then with the last fewerBy planned nodes of the group grown last left
// out.
func (o *oracle) check(paths []string, opts oracleOptions, fewerBy int) *oracleReport {
	t := o.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	objs, res, err := o.plan(ctx, paths, opts)
	if err != nil {
		t.Fatalf("plan %v: %v", paths, err)
	}
	rep := &oracleReport{PerGroup: map[string]int{}}
	newNodes := plannedNodes(objs, res)
	for _, n := range newNodes {
		rep.NewNodes = append(rep.NewNodes, n.name)
		rep.PerGroup[n.group]++
	}
	planned := map[string]string{} // "ns/name" -> node
	for _, pl := range res.Plan.ExistingNodes {
		planned[pl.Pod.String()] = pl.Node
	}
	for _, su := range res.Plan.ScaleUps {
		for _, pl := range su.Placements {
			planned[pl.Pod.String()] = pl.Node
		}
	}
	for _, ns := range res.Plan.NoScaleUp {
		rep.LeftOut = append(rep.LeftOut, ns.Pod.String())
	}
	rep.Placed = len(planned)

	// All planned nodes: every placed pod binds, the others stay pending.
	o.build(ctx, objs, newNodes)
	stopDriver := o.driveBindingConditions(ctx)
	bound := o.waitBoundOrUnschedulable(ctx, objs.PendingPods, sets.KeySet(planned), true)
	stopDriver()
	for _, key := range sortedKeys(planned) {
		// "" is the scheduler's verdict unschedulable: not bound either.
		node := bound[key]
		if node == "" {
			rep.Unbound = append(rep.Unbound, key)
			continue
		}
		rep.Bound++
		if node != planned[key] {
			rep.Differ = append(rep.Differ, fmt.Sprintf("%s: planned %s, bound %s", key, planned[key], node))
		}
	}
	// Pods of one controller are alike: where the plan leaves some out
	// (a cap), which of them the scheduler binds is its tie-break. A
	// left-out pod bound in place of a planned sibling is a swap, not a
	// difference in what the plan says.
	rep.Unbound, rep.LeftOut = swapSiblings(objs.PendingPods, rep.Unbound, rep.LeftOut, bound, rep)
	if len(rep.Unbound) > 0 {
		rep.UnboundWhy = o.conditionsOf(ctx, rep.Unbound)
		o.stopScheduler()
		rep.SchedulerLog = o.lastSchLog
	}
	rep.LeftOutBound = leftOutBound(rep.LeftOut, bound)
	o.cleanup(ctx)
	if len(newNodes) == 0 {
		return rep
	}

	// Fewer nodes: drop the last new nodes of the group the plan grew
	// last. Its count was estimated with every earlier node in place, so
	// it must be minimal; an earlier group's may not be, by the
	// expander's greedy choice (as in the Cluster Autoscaler, which grows
	// one group per loop).
	last := res.Plan.ScaleUps[len(res.Plan.ScaleUps)-1].NodeGroup
	rep.FewerGroup, rep.FewerBy = last, fewerBy
	var fewer []newNode
	for i := len(newNodes) - 1; i >= 0; i-- {
		if newNodes[i].group == last && fewerBy > 0 {
			fewerBy--
			continue
		}
		fewer = append(fewer, newNodes[i])
	}
	if fewerBy > 0 {
		t.Fatalf("group %s grew by fewer than the %d nodes to leave out", last, rep.FewerBy)
	}
	slices.Reverse(fewer)
	o.build(ctx, objs, fewer)
	stopDriver = o.driveBindingConditions(ctx)
	verdicts := o.waitBoundOrUnschedulable(ctx, objs.PendingPods, sets.KeySet(planned), false)
	stopDriver()
	for key := range planned {
		if _, ok := verdicts[key]; !ok {
			rep.FewerUnsettled = append(rep.FewerUnsettled, key)
		}
	}
	for _, node := range verdicts {
		if node == "" {
			rep.FewerPending++
		}
	}
	sort.Strings(rep.FewerUnsettled)
	o.cleanup(ctx)
	return rep
}

type newNode struct{ name, group string }

// plannedNodes lists the nodes the plan adds, in the order the planner
// named them within each group (<group>-new-<n>).
func plannedNodes(objs *input.Objects, res *offline.Result) []newNode {
	live := sets.New[string]()
	for _, n := range objs.Nodes {
		live.Insert(n.Name)
	}
	var out []newNode
	for _, name := range res.Snapshot.NodeNames() {
		if live.Has(name) {
			continue
		}
		out = append(out, newNode{name: name, group: nodegroup.Group(res.Snapshot.NodeInfo(name).Node())})
	}
	return out
}

// fresh makes stored metadata fit for a create: the API server assigns
// UIDs, versions and timestamps. Owner references are dropped: the owners
// are not created, and the garbage collector would delete the orphans.
func fresh(m *metav1.ObjectMeta) {
	m.UID, m.ResourceVersion, m.Generation = "", "", 0
	m.CreationTimestamp = metav1.Time{}
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
	m.ManagedFields = nil
	m.OwnerReferences = nil
}

// build creates the scenario: namespaces, classes, claim templates, the
// live nodes with their slices, running pods and their claims, the new
// nodes; then it starts the replay's scheduler, creates the new nodes'
// DaemonSet pods and last the pending pods in the scheduler's queue order.
func (o *oracle) build(ctx context.Context, objs *input.Objects, newNodes []newNode) {
	t := o.t
	t.Helper()
	c := o.cp.Client
	o.namespaces(ctx, objs)
	for _, dc := range objs.DeviceClasses {
		dc = dc.DeepCopy()
		fresh(&dc.ObjectMeta)
		if _, err := c.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("DeviceClass %s: %v", dc.Name, err)
		}
	}
	for _, rule := range objs.DeviceTaintRules {
		rule = rule.DeepCopy()
		fresh(&rule.ObjectMeta)
		if _, err := c.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
			t.Fatalf("DeviceTaintRule %s: %v", rule.Name, err)
		}
	}
	for _, tmpl := range objs.ResourceClaimTemplates {
		tmpl = tmpl.DeepCopy()
		fresh(&tmpl.ObjectMeta)
		if _, err := c.ResourceV1().ResourceClaimTemplates(tmpl.Namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("ResourceClaimTemplate %s/%s: %v", tmpl.Namespace, tmpl.Name, err)
		}
	}
	for _, pg := range objs.PodGroups {
		pg = pg.DeepCopy()
		fresh(&pg.ObjectMeta)
		if _, err := c.SchedulingV1beta1().PodGroups(pg.Namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatalf("PodGroup %s/%s: %v", pg.Namespace, pg.Name, err)
		}
	}
	for _, n := range objs.Nodes {
		n = n.DeepCopy()
		fresh(&n.ObjectMeta)
		if _, err := o.cp.AddReadyNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	o.slices(ctx, objs.ResourceSlices)
	lastNode := ""
	if len(objs.Nodes) > 0 {
		lastNode = objs.Nodes[len(objs.Nodes)-1].Name
	}

	// Running pods keep their node and status; their claims are owned by
	// and reserved for the re-created pods (new UIDs).
	uids := map[types.UID]types.UID{}
	for _, p := range objs.RunningPods {
		created := o.createPod(ctx, p)
		// The claim controller may write the new pod's status first.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			latest, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			latest.Status = *p.Status.DeepCopy()
			_, err = c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, latest, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("Pod %s/%s status: %v", p.Namespace, p.Name, err)
		}
		uids[p.UID] = created.UID
	}
	for _, claim := range objs.ResourceClaims {
		o.createClaim(ctx, claim, uids)
	}

	groups := map[string]*nodegroup.NodeGroup{}
	for _, g := range objs.NodeGroups {
		groups[g.Name] = g
	}
	var dsPods []*v1.Pod
	for _, nn := range newNodes {
		node, nodeSlices := groups[nn.group].NewNode(nn.name)
		fresh(&node.ObjectMeta)
		if _, err := o.cp.AddReadyNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		o.slices(ctx, nodeSlices)
		lastNode = nn.name
		// As the DaemonSet controller would: one pod per matching node,
		// pinned by node affinity and placed by the scheduler.
		dsPods = append(dsPods, daemonsets.PodsFor(klog.Background(), node, objs.DaemonSets)...)
	}
	o.startScheduler(ctx)
	for _, p := range dsPods {
		o.createPod(ctx, p)
	}
	// The planner puts DaemonSet pods on a new node before any pending
	// pod; so does the real cluster, where they arrive with the node.
	if got := o.waitBoundOrUnschedulable(ctx, dsPods, keys(dsPods), true); len(got) != len(dsPods) {
		t.Errorf("DaemonSet pods bound %v of %d", got, len(dsPods))
	}
	o.barrier(ctx, lastNode)
	for _, p := range scaleup.SortSchedulerQueue(objs.PendingPods) {
		o.claimsMade(ctx, o.createPod(ctx, p))
	}
}

// driveBindingConditions acts, while the replay runs, as a driver whose
// devices have binding conditions (KEP-5007): it sets every condition a
// claim's allocated devices wait for once the scheduler has allocated
// them, so PreBind goes on. Off (a no-op) unless the scenario asks for it.
func (o *oracle) driveBindingConditions(ctx context.Context) (stop func()) {
	if !o.bindingDriver {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			claims, err := o.cp.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range claims.Items {
				c := &claims.Items[i]
				if c.Status.Allocation == nil || c.Status.Devices != nil {
					continue
				}
				for _, r := range c.Status.Allocation.Devices.Results {
					if len(r.BindingConditions) == 0 {
						continue
					}
					status := resourceapi.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
					for _, cond := range r.BindingConditions {
						status.Conditions = append(status.Conditions, metav1.Condition{Type: cond, Status: metav1.ConditionTrue,
							Reason: "Attached", LastTransitionTime: metav1.Now()})
					}
					c.Status.Devices = append(c.Status.Devices, status)
				}
				if c.Status.Devices != nil {
					_, _ = o.cp.Client.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
				}
			}
			return false, nil
		})
	}()
	return func() { cancel(); <-done }
}

// barrier returns once the scheduler runs and has seen node, the last
// one created, by binding a pod pinned to it and deleting that pod. The
// pending pods come after it one by one, so the scheduler's queue takes
// them in the order the plan assumes (its first list would be in name
// order).
func (o *oracle) barrier(ctx context.Context, node string) {
	t := o.t
	t.Helper()
	if node == "" {
		return
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "oracle-barrier", Namespace: metav1.NamespaceDefault},
		Spec: v1.PodSpec{
			NodeSelector:                  map[string]string{v1.LabelHostname: node},
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []v1.Container{{Name: "main", Image: "registry.example/pause"}},
		},
	}
	c := o.cp.Client.CoreV1().Pods(pod.Namespace)
	if _, err := c.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("barrier pod: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, o.settle, true, func(ctx context.Context) (bool, error) {
		p, err := c.Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	}); err != nil {
		t.Fatalf("barrier pod not bound to %s: %v", node, err)
	}
	if err := c.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("barrier pod: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, o.settle, true, func(ctx context.Context) (bool, error) {
		_, err := c.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("barrier pod not deleted: %v", err)
	}
}

// claimsMade waits, for a pod with claims from templates, until the
// scheduler has bound it or found it unschedulable. The scheduler queues
// such a pod only once the claim controller has made its claims; a later
// pod without them would otherwise go first, and the order the plan
// assumes (the scheduler's queue order) would depend on the controller's
// speed. Pods the scheduler does not try are not waited for.
func (o *oracle) claimsMade(ctx context.Context, pod *v1.Pod) {
	t := o.t
	t.Helper()
	fromTemplate := slices.ContainsFunc(pod.Spec.ResourceClaims, func(rc v1.PodResourceClaim) bool {
		return rc.ResourceClaimTemplateName != nil
	})
	tried := len(pod.Spec.SchedulingGates) == 0 && pod.Spec.SchedulerName == v1.DefaultSchedulerName
	if !fromTemplate || !tried {
		return
	}
	c := o.cp.Client.CoreV1().Pods(pod.Namespace)
	// A gang's pod gets no verdict of its own before its whole gang
	// exists: wait for its claims only.
	gangPod := pod.Spec.SchedulingGroup != nil
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, o.settle, true, func(ctx context.Context) (bool, error) {
		p, err := c.Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && gangPod {
			return len(p.Status.ResourceClaimStatuses) == len(p.Spec.ResourceClaims), nil
		}
		return err == nil && (p.Spec.NodeName != "" || unschedulable(p)), nil
	}); err != nil {
		t.Fatalf("Pod %s/%s (claims from templates): no verdict from the scheduler: %v", pod.Namespace, pod.Name, err)
	}
}

func keys(pods []*v1.Pod) sets.Set[string] {
	out := sets.New[string]()
	for _, p := range pods {
		out.Insert(p.Namespace + "/" + p.Name)
	}
	return out
}

// namespaces creates the scenario's namespaces and waits for their default
// ServiceAccount, without which pods are refused.
func (o *oracle) namespaces(ctx context.Context, objs *input.Objects) {
	t := o.t
	t.Helper()
	// Admin-access claims are allowed only in namespaces labelled for it
	// (dumps' Namespace objects are not kept: the templates say which).
	admin := sets.New[string]()
	for _, tmpl := range objs.ResourceClaimTemplates {
		for _, r := range tmpl.Spec.Spec.Devices.Requests {
			if r.Exactly != nil && ptr.Deref(r.Exactly.AdminAccess, false) {
				admin.Insert(tmpl.Namespace)
			}
		}
	}
	for _, ns := range sets.List(scenarioNamespaces(objs)) {
		meta := metav1.ObjectMeta{Name: ns}
		if admin.Has(ns) {
			meta.Labels = map[string]string{"resource.kubernetes.io/admin-access": "true"}
		}
		_, err := o.cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: meta}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Namespaces outlive scenarios: an earlier one made it, with
			// its own labels.
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := o.cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Labels = meta.Labels
				_, err = o.cp.Client.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
		}
		if err != nil {
			t.Fatalf("Namespace %s: %v", ns, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, o.settle, true, func(ctx context.Context) (bool, error) {
			_, err := o.cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			t.Fatalf("namespace %s: no default ServiceAccount: %v", ns, err)
		}
	}
}

func scenarioNamespaces(objs *input.Objects) sets.Set[string] {
	out := sets.New[string]()
	for _, p := range append(append([]*v1.Pod{}, objs.RunningPods...), objs.PendingPods...) {
		out.Insert(p.Namespace)
	}
	for _, c := range objs.ResourceClaims {
		out.Insert(c.Namespace)
	}
	for _, tmpl := range objs.ResourceClaimTemplates {
		out.Insert(tmpl.Namespace)
	}
	for _, ds := range objs.DaemonSets {
		out.Insert(ds.Namespace)
	}
	return out
}

func (o *oracle) slices(ctx context.Context, list []*resourceapi.ResourceSlice) {
	for _, s := range list {
		s = s.DeepCopy()
		fresh(&s.ObjectMeta)
		if _, err := o.cp.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			o.t.Fatalf("ResourceSlice %s: %v", s.Name, err)
		}
	}
}

func (o *oracle) createPod(ctx context.Context, p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	fresh(&p.ObjectMeta)
	p.Status = v1.PodStatus{}
	created, err := o.cp.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		o.t.Fatalf("Pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return created
}

// createClaim re-creates a claim with its allocation; owner references and
// reservations point at the re-created pods.
func (o *oracle) createClaim(ctx context.Context, claim *resourceapi.ResourceClaim, uids map[types.UID]types.UID) {
	t := o.t
	t.Helper()
	c := o.cp.Client.ResourceV1().ResourceClaims(claim.Namespace)
	want := claim.DeepCopy()
	fresh(&want.ObjectMeta)
	for _, ref := range claim.OwnerReferences {
		if uid, ok := uids[ref.UID]; ok && ref.Kind == "Pod" {
			ref.UID = uid
			want.OwnerReferences = append(want.OwnerReferences, ref)
		}
	}
	want.Status = resourceapi.ResourceClaimStatus{}
	created, err := c.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("ResourceClaim %s/%s: %v", claim.Namespace, claim.Name, err)
	}
	if claim.Status.Allocation == nil {
		return
	}
	status := *claim.Status.DeepCopy()
	status.ReservedFor = nil
	for _, r := range claim.Status.ReservedFor {
		if uid, ok := uids[r.UID]; ok {
			r.UID = uid
			status.ReservedFor = append(status.ReservedFor, r)
		}
	}
	// The claim controller may touch the new claim first.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := c.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Status = status
		_, err = c.UpdateStatus(ctx, latest, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("ResourceClaim %s/%s status: %v", claim.Namespace, claim.Name, err)
	}
}

// waitBoundOrUnschedulable waits until every pod in want is bound (or,
// unless allBound, reported unschedulable), then returns each bound pod's
// node and "" for each unschedulable one, over all pods given. Pods not in
// want are looked at once, when the wait ends: the scheduler had as long
// as it needed for the others. On timeout it returns what it saw.
func (o *oracle) waitBoundOrUnschedulable(ctx context.Context, pods []*v1.Pod, want sets.Set[string], allBound bool) map[string]string {
	seen := map[string]string{}
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.settle, true, func(ctx context.Context) (bool, error) {
		// A poll cut short (the wait's own deadline) keeps the last
		// complete view.
		now := map[string]string{}
		for _, ns := range sets.List(namespacesOf(pods)) {
			list, err := o.cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range list.Items {
				p := &list.Items[i]
				key := p.Namespace + "/" + p.Name
				switch {
				case p.Spec.NodeName != "":
					now[key] = p.Spec.NodeName
				case unschedulable(p):
					now[key] = ""
				}
			}
		}
		seen = now
		done := true
		for key := range want {
			node, ok := seen[key]
			done = done && ok && (node != "" || !allBound)
		}
		return done, nil
	})
	out := map[string]string{}
	all := keys(pods)
	for key, node := range seen {
		if all.Has(key) {
			out[key] = node
		}
	}
	// Unschedulable pods outside want are not verdicts the caller asked
	// for; only bound ones matter to it.
	for key, node := range out {
		if node == "" && !want.Has(key) {
			delete(out, key)
		}
	}
	return out
}

// conditionsOf describes the scheduler's verdict on each pod "ns/name".
func (o *oracle) conditionsOf(ctx context.Context, pods []string) []string {
	var out []string
	for _, key := range pods {
		ns, name, _ := strings.Cut(key, "/")
		p, err := o.cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			out = append(out, key+": "+err.Error())
			continue
		}
		out = append(out, key+": "+conditions(p))
	}
	return out
}

func namespacesOf(pods []*v1.Pod) sets.Set[string] {
	out := sets.New[string]()
	for _, p := range pods {
		out.Insert(p.Namespace)
	}
	return out
}

func unschedulable(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// cleanup stops the replay's scheduler, deletes everything the scenario
// made, cluster-scoped objects too, and waits until it is gone, so the
// next replay starts empty. Namespaces stay (empty): deleting them waits
// on the namespace controller, seconds per replay on a loaded machine.
func (o *oracle) cleanup(ctx context.Context) {
	t := o.t
	t.Helper()
	o.stopScheduler()
	c := o.cp.Client
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	nsList, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Scenarios may put pods in kube-system (DaemonSets often live
	// there): pods and claims go in every namespace.
	var scenarioNS []string
	for _, ns := range nsList.Items {
		scenarioNS = append(scenarioNS, ns.Name)
	}
	for _, ns := range scenarioNS {
		if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
			t.Errorf("delete pods in %s: %v", ns, err)
		}
		if err := c.ResourceV1().ResourceClaimTemplates(ns).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
			t.Errorf("delete claim templates in %s: %v", ns, err)
		}
		if err := c.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
			t.Errorf("delete claims in %s: %v", ns, err)
		}
		if err := c.SchedulingV1beta1().PodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
			t.Errorf("delete PodGroups in %s: %v", ns, err)
		}
	}
	if err := c.ResourceV1().ResourceSlices().DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		t.Errorf("delete ResourceSlices: %v", err)
	}
	if err := c.CoreV1().Nodes().DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		t.Errorf("delete Nodes: %v", err)
	}
	if err := c.ResourceV1().DeviceClasses().DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		t.Errorf("delete DeviceClasses: %v", err)
	}
	if err := c.ResourceV1().DeviceTaintRules().DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		t.Errorf("delete DeviceTaintRules: %v", err)
	}
	// Allocated claims keep a finalizer until the claim controller sees
	// their pods gone; the wait lifts it once the pods are gone.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.settle, true, func(ctx context.Context) (bool, error) {
		left, err := o.leftovers(ctx, scenarioNS)
		if err != nil {
			return false, nil
		}
		return len(left) == 0, nil
	}); err != nil {
		left, _ := o.leftovers(ctx, scenarioNS)
		t.Fatalf("scenario objects not deleted: %v", left)
	}
}

// leftovers lists the scenario objects still there; it lifts finalizers
// from claims being deleted whose pods are gone.
func (o *oracle) leftovers(ctx context.Context, namespaces []string) ([]string, error) {
	c := o.cp.Client
	var left []string
	for _, ns := range namespaces {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			left = append(left, "Pod "+ns+"/"+p.Name)
		}
		claims, err := c.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range claims.Items {
			claim := &claims.Items[i]
			left = append(left, "ResourceClaim "+ns+"/"+claim.Name)
			if claim.DeletionTimestamp != nil && len(pods.Items) == 0 && len(claim.Finalizers) > 0 {
				claim.Finalizers = nil
				_, _ = c.ResourceV1().ResourceClaims(ns).Update(ctx, claim, metav1.UpdateOptions{})
			}
		}
	}
	for _, ns := range namespaces {
		groups, err := c.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range groups.Items {
			g := &groups.Items[i]
			left = append(left, "PodGroup "+ns+"/"+g.Name)
			// Its protection finalizer is the controller-manager's, which
			// the test control plane runs without the gate.
			if g.DeletionTimestamp != nil && len(g.Finalizers) > 0 {
				g.Finalizers = nil
				_, _ = c.SchedulingV1beta1().PodGroups(ns).Update(ctx, g, metav1.UpdateOptions{})
			}
		}
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		left = append(left, "Node "+n.Name)
	}
	slices, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range slices.Items {
		left = append(left, "ResourceSlice "+s.Name)
	}
	classes, err := c.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, dc := range classes.Items {
		left = append(left, "DeviceClass "+dc.Name)
	}
	rules, err := c.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, r := range rules.Items {
		left = append(left, "DeviceTaintRule "+r.Name)
	}
	return left, nil
}

// leftOutBound lists the left-out pods the scheduler bound, with their
// node. A planned pod swapped into leftOut may carry the scheduler's
// verdict unschedulable (""): pending, as a left-out pod should be.
func leftOutBound(leftOut []string, bound map[string]string) []string {
	var out []string
	for _, key := range leftOut {
		if node := bound[key]; node != "" {
			out = append(out, key+" on "+node)
		}
	}
	return out
}

// swapSiblings pairs each planned pod left pending with a left-out pod of
// the same controller that the scheduler bound instead; paired pods count
// as bound and left out the other way round, noted in rep.Differ.
func swapSiblings(pods []*v1.Pod, unbound, leftOut []string, bound map[string]string, rep *oracleReport) ([]string, []string) {
	owner := map[string]types.UID{}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil {
			owner[p.Namespace+"/"+p.Name] = ref.UID
		}
	}
	var stillUnbound []string
	taken := map[string]bool{}
	for _, u := range unbound {
		paired := ""
		for _, l := range leftOut {
			if _, ok := bound[l]; ok && !taken[l] && owner[u] != "" && owner[l] == owner[u] {
				paired = l
				break
			}
		}
		if paired == "" {
			stillUnbound = append(stillUnbound, u)
			continue
		}
		taken[paired] = true
		rep.Bound++
		rep.Differ = append(rep.Differ, fmt.Sprintf("%s bound in place of its sibling %s (the scheduler's tie-break)", paired, u))
	}
	var stillLeftOut []string
	for _, l := range leftOut {
		if taken[l] {
			continue
		}
		stillLeftOut = append(stillLeftOut, l)
	}
	for _, u := range unbound {
		if !slices.Contains(stillUnbound, u) {
			stillLeftOut = append(stillLeftOut, u)
		}
	}
	return stillUnbound, stillLeftOut
}
