package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/cloudprovider/local"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/test/auditlog"
	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/proc"
)

// groupSpec describes one node group of a test.
type groupSpec struct {
	name          string
	min, max      int
	cpu           int64             // template cores, 32 when 0
	annotations   map[string]string // on the NodeGroup
	draDevices    int               // devices published by the group's DRA driver
	pluginDevices int64             // devices in allocatable (device plugin)
	// labels go on the template, so on every node the group makes (the
	// local provider's Node objects and test nodes copy them): a domain
	// label such as example.com/rack puts the group in that domain.
	labels map[string]string
}

// nodeGroups writes NodeGroup objects whose nodes carry the env's label,
// so only the env's pods fit them.
func (e *env) nodeGroups(groups ...groupSpec) string {
	e.t.Helper()
	var docs []string
	for _, ng := range e.nodeGroupObjects(groups...) {
		data, err := yaml.Marshal(ng)
		if err != nil {
			e.t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	path := filepath.Join(e.t.TempDir(), "nodegroups.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// nodeGroupObjects are the NodeGroup objects nodeGroups writes.
func (e *env) nodeGroupObjects(groups ...groupSpec) []nodegroup.NodeGroup {
	var out []nodegroup.NodeGroup
	for _, g := range groups {
		cpu := g.cpu
		if cpu == 0 {
			cpu = 32
		}
		tmpl := fx.Node("template", cpu, 128, nil)
		if g.pluginDevices > 0 {
			tmpl = fx.Node("template", cpu, 128, fx.GPUs(e.resource, g.pluginDevices))
		}
		tmpl.Name, tmpl.UID = "", ""
		tmpl.Labels = map[string]string{"e2e-test": e.name}
		maps.Copy(tmpl.Labels, g.labels)
		tmpl.Status.Conditions = nil
		ng := nodegroup.NodeGroup{TypeMeta: metav1.TypeMeta{APIVersion: nodegroup.APIVersion, Kind: nodegroup.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: g.name, Annotations: g.annotations},
			Spec:       nodegroup.Spec{MinSize: g.min, MaxSize: g.max, Template: *tmpl}}
		if g.draDevices > 0 {
			ng.Spec.ResourceSlices = append(ng.Spec.ResourceSlices, fx.DeviceSlice("x", e.driver, g.draDevices, "gpu").Spec)
			ng.Spec.ResourceSlices[0].NodeName, ng.Spec.ResourceSlices[0].Pool = nil, resourcePool()
		}
		out = append(out, ng)
	}
	return out
}

// autoscaler runs draxr-autoscaler as its own ServiceAccount with fast
// timings; it is stopped when the test ends.
func (e *env) autoscaler(nodeGroups string, extra ...string) *proc.Process {
	p, _ := e.autoscalerWithAddress(nodeGroups, extra...)
	return p
}

// autoscalerWithAddress also returns where it serves /metrics and /health-check.
func (e *env) autoscalerWithAddress(nodeGroups string, extra ...string) (*proc.Process, string) {
	e.t.Helper()
	return e.autoscalerBinary("draxr-autoscaler", nodeGroups, extra...)
}

// autoscalerBinary runs the named build of draxr-autoscaler: the shipped
// one, or draxr-autoscaler-testnodes, whose local provider starts real
// test nodes.
func (e *env) autoscalerBinary(binary, nodeGroups string, extra ...string) (*proc.Process, string) {
	e.t.Helper()
	kubeconfig, err := cp.ServiceAccountKubeconfig(e.ctx, "draxr-autoscaler-"+e.name,
		filepath.Join(root, "autoscaler/deploy/rbac.yaml"), "kube-system/draxr-autoscaler")
	if err != nil {
		e.t.Fatal(err)
	}
	e.grantPerTestNames()
	port, err := controlplane.FreePort()
	if err != nil {
		e.t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + kubeconfig}
	if nodeGroups != "" {
		// Empty for providers that do not read NodeGroup files.
		args = append(args, "--node-group-config="+nodeGroups)
	}
	args = append(append(args,
		"--scheduler-config="+filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		"--scan-interval=1s", "--local-node-ready-delay=1s", "--local-slices-delay=1s",
		"--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s",
		"--leader-elect=false", "--status-config-map-name=draxr-autoscaler-status-"+e.name,
		fmt.Sprintf("--address=127.0.0.1:%d", port), "--v=2",
	), extra...)
	p, err := cp.StartProcess("draxr-autoscaler-"+e.name, filepath.Join(bins, binary), args...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("autoscaler log:\n%s", p.LogTail(6000))
		}
		p.Stop(10 * time.Second)
	})
	return p, fmt.Sprintf("127.0.0.1:%d", port)
}

// noListsWhile runs during (a check that nothing changes), then waits
// until loops whole loops of the autoscaler at addr have passed since it
// began, and fails the test if those steady loops sent a LIST of what the
// autoscaler watches (Nodes, ResourceSlices): the audit log says what
// they sent.
func (e *env) noListsWhile(addr string, loops int, during func()) {
	e.t.Helper()
	counts, n, err := auditlog.SteadyLoops(e.ctx, cp.AuditLog, addr, loops, during)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("audit: %.0f steady loops, the autoscaler's requests: %s", n, counts)
}

// grantPerTestNames lets the autoscaler's ServiceAccount use this test's
// own status ConfigMap and lease: the shipped Role names only the default
// ones (resourceNames), and tests run side by side.
func (e *env) grantPerTestNames() {
	e.t.Helper()
	name := "draxr-autoscaler-e2e-" + e.name
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"draxr-autoscaler-status-" + e.name},
			Verbs: []string{"get", "update", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"draxr-autoscaler-" + e.name},
			Verbs: []string{"get", "update"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "draxr-autoscaler", Namespace: "kube-system"}}}
	if _, err := cp.Client.RbacV1().Roles("kube-system").Create(e.ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings("kube-system").Create(e.ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
}

// groupNodes lists the nodes of a group.
func (e *env) groupNodes(group string) []v1.Node {
	e.t.Helper()
	list, err := cp.Client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: nodegroup.GroupLabel + "=" + group})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// replicaSet creates a ReplicaSet of pods asking for count of resource.
func (e *env) replicaSet(name string, replicas int32, resource v1.ResourceName, count int64) {
	e.t.Helper()
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				NodeSelector:                  map[string]string{"e2e-test": e.name},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Limits: v1.ResourceList{resource: fx.Count(count)}}}},
			}}},
	}
	if _, err := cp.Client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) scaleReplicaSet(name string, replicas int32) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		rs, err := cp.Client.AppsV1().ReplicaSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rs.Spec.Replicas = ptr.To(replicas)
		_, err = cp.Client.AppsV1().ReplicaSets(e.ns).Update(ctx, rs, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// waitPods waits until the namespace has want pods bound and none pending
// (terminating pods aside), and returns pods per node.
func (e *env) waitPodsBound(want int, timeout time.Duration) map[string]int {
	e.t.Helper()
	perNode := map[string]int{}
	var last string
	err := wait.PollUntilContextTimeout(e.ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		clear(perNode)
		bound, pending := 0, 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.NodeName != "" {
				bound++
				perNode[p.Spec.NodeName]++
			} else {
				pending++
			}
		}
		last = fmt.Sprintf("%d bound, %d pending", bound, pending)
		return bound == want && pending == 0, nil
	})
	if err != nil {
		e.t.Fatalf("want %d pods bound: %v (%s)", want, err, last)
	}
	return perNode
}

// consistently is a "nothing happens" check: cond must hold at every
// look, every 250ms, over an observation window of d. There is no event
// to wait for when nothing happens, so the window is explicit: callers
// give a few of the autoscaler's 1s scan intervals (--scan-interval=1s
// above), time for a wrong decision to show.
func (e *env) consistently(d time.Duration, what string, cond func() error) {
	e.t.Helper()
	var failed error
	// The poll ends early only when cond fails; reaching d is the success.
	_ = wait.PollUntilContextTimeout(e.ctx, 250*time.Millisecond, d, true, func(context.Context) (bool, error) {
		failed = cond()
		return failed != nil, nil
	})
	if failed != nil {
		e.t.Fatalf("%s: %v", what, failed)
	}
	if err := e.ctx.Err(); err != nil {
		e.t.Fatalf("%s: test context ended before the window did: %v", what, err)
	}
}

func (e *env) eventually(d time.Duration, what string, cond func() error) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, 250*time.Millisecond, d, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		e.t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// podsPerNode counts the namespace's bound, not terminating pods per node.
func (e *env) podsPerNode() map[string]int {
	e.t.Helper()
	pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// status reads this test's status ConfigMap: CA's schema under "status",
// decoded strictly (a field CA's schema lacks fails), and draxr's detail.
func (e *env) status() (core.ClusterAutoscalerStatus, core.DraxrStatus, error) {
	var s core.ClusterAutoscalerStatus
	var d core.DraxrStatus
	cm, err := cp.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(e.ctx, "draxr-autoscaler-status-"+e.name, metav1.GetOptions{})
	if err != nil {
		return s, d, err
	}
	if _, err := time.Parse(core.LastUpdatedFormat, cm.Annotations[core.LastUpdatedAnnotation]); err != nil {
		return s, d, fmt.Errorf("annotation %s: %w", core.LastUpdatedAnnotation, err)
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data[core.StatusKey]), &s); err != nil {
		return s, d, fmt.Errorf("status key does not parse with CA's schema: %w\n%s", err, cm.Data[core.StatusKey])
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data[core.DraxrStatusKey]), &d); err != nil {
		return s, d, fmt.Errorf("draxr key: %w\n%s", err, cm.Data[core.DraxrStatusKey])
	}
	return s, d, nil
}

// existingGroupNode adds node <group>-0 as the local provider creates one,
// not yet Ready: the provider adopts it by its group label, turns it Ready
// and publishes its slices. draxr grows no group to its min size without
// pending pods (as CA by default), so a test that needs a group's node up
// before its pods makes it here.
func (e *env) existingGroupNode(g groupSpec) {
	e.t.Helper()
	ng := e.nodeGroupObjects(g)[0]
	node, _ := ng.NewNode(g.name + "-0")
	node.Spec.ProviderID = local.ProviderIDPrefix + g.name + "/" + node.Name
	status := node.Status
	status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "Provisioning", LastTransitionTime: metav1.Now()}}
	created, err := apinodes.CreateNode(e.ctx, cp.Client, g.name, node)
	if err != nil {
		e.t.Fatal(err)
	}
	created.Status = status
	if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// nodesReady says why the named nodes are not all Ready yet and, with
// slices, their DRA driver's slices published; nil once they are.
func (e *env) nodesReady(slices bool, names ...string) error {
	for _, name := range names {
		n, err := cp.Client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
		}
		if !ready {
			return fmt.Errorf("node %s not Ready", name)
		}
		if !slices {
			continue
		}
		list, err := cp.Client.ResourceV1().ResourceSlices().List(e.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("node %s has no ResourceSlice yet", name)
		}
	}
	return nil
}
