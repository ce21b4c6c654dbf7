package drainability

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type podOpt func(*v1.Pod)

// pod is a running ReplicaSet pod in namespace "ns"; opts change it.
func pod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr.To(true)}}},
		Spec:   v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func annotated(k, v string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}
func owner(kind string) podOpt {
	return func(p *v1.Pod) { p.OwnerReferences[0].Kind = kind }
}
func noOwner(p *v1.Pod)      { p.OwnerReferences = nil }
func inKubeSystem(p *v1.Pod) { p.Namespace = metav1.NamespaceSystem }
func volume(name string, src v1.VolumeSource) podOpt {
	return func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: src}) }
}
func phase(ph v1.PodPhase, restart v1.RestartPolicy) podOpt {
	return func(p *v1.Pod) { p.Status.Phase, p.Spec.RestartPolicy = ph, restart }
}
func deletedAgo(d time.Duration, grace int64) podOpt {
	return func(p *v1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-d)}
		p.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	}
}

var (
	emptyDir  = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
	memoryDir = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}
	hostPath  = v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data"}}
	configMap = v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}
)

func pdb(ns, name string, allowed int32, matchLabels map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: matchLabels}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func TestPod(t *testing.T) {
	noSkips := Options{}
	tests := []struct {
		name        string
		pod         *v1.Pod
		opts        *Options // default: DefaultOptions
		pdbs        []*policyv1.PodDisruptionBudget
		want        Outcome
		wantReason  PodReason
		wantMessage string
	}{
		{name: "replicated pod moves", pod: pod("p"), want: Move},
		{name: "mirror pod goes with the node", pod: pod("p", noOwner, annotated(v1.MirrorPodAnnotationKey, "x")), want: Skip},
		{name: "DaemonSet pod goes with the node", pod: pod("p", owner("DaemonSet")), want: Skip},
		{name: "DaemonSet pod with enable-ds-eviction is evicted", pod: pod("p", owner("DaemonSet"), annotated(EnableDSEvictionAnnotation, "true")), want: Evict},
		{name: "DaemonSet pod with enable-ds-eviction false goes with the node", pod: pod("p", owner("DaemonSet"), annotated(EnableDSEvictionAnnotation, "false")), want: Skip},
		{name: "DaemonSet pod in kube-system goes with the node", pod: pod("p", owner("DaemonSet"), inKubeSystem), want: Skip},
		{name: "succeeded pod with restartPolicy Never is ignored", pod: pod("p", noOwner, phase(v1.PodSucceeded, v1.RestartPolicyNever)), want: Skip},
		{name: "succeeded pod with restartPolicy OnFailure is ignored", pod: pod("p", noOwner, phase(v1.PodSucceeded, v1.RestartPolicyOnFailure)), want: Skip},
		{name: "failed pod is ignored", pod: pod("p", noOwner, phase(v1.PodFailed, v1.RestartPolicyAlways)), want: Skip},
		{name: "terminating past grace period plus 30s is ignored", pod: pod("p", noOwner, deletedAgo(61*time.Second, 30)), want: Skip},
		{name: "terminating within grace period still counts", pod: pod("p", noOwner, deletedAgo(59*time.Second, 30)),
			want: Block, wantReason: NotReplicated, wantMessage: "ns/p is not replicated"},
		{name: "pod without controller blocks", pod: pod("p", noOwner),
			want: Block, wantReason: NotReplicated, wantMessage: "ns/p is not replicated"},
		{name: "pod of a custom controller blocks", pod: pod("p", owner("MyOperator")),
			want: Block, wantReason: NotReplicated, wantMessage: "ns/p is not replicated"},
		{name: "pod of a custom controller moves without skip-nodes-with-custom-controller-pods", pod: pod("p", owner("MyOperator")),
			opts: &Options{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true}, want: Move},
		{name: "Job, StatefulSet and ReplicationController pods move", pod: pod("p", owner("StatefulSet")), want: Move},
		{name: "pod without controller moves with safe-to-evict true", pod: pod("p", noOwner, annotated(SafeToEvictAnnotation, "true")), want: Move},
		{name: "safe-to-evict false blocks", pod: pod("p", annotated(SafeToEvictAnnotation, "false")),
			want: Block, wantReason: NotSafeToEvictAnnotation, wantMessage: "pod annotated as not safe to evict present: p"},
		{name: "safe-to-evict false blocks whatever the flags", pod: pod("p", annotated(SafeToEvictAnnotation, "false")), opts: &noSkips,
			want: Block, wantReason: NotSafeToEvictAnnotation},
		{name: "safe-to-evict on-completion blocks while running", pod: pod("p", annotated(SafeToEvictAnnotation, "on-completion")),
			want: Block, wantReason: SafeToEvictOnCompletion},
		{name: "safe-to-evict on-completion is ignored once completed",
			pod: pod("p", annotated(SafeToEvictAnnotation, "on-completion"), phase(v1.PodSucceeded, v1.RestartPolicyNever)), want: Skip},
		{name: "emptyDir blocks", pod: pod("p", volume("scratch", emptyDir)),
			want: Block, wantReason: LocalStorageRequested, wantMessage: "pod with local storage present: p"},
		{name: "hostPath blocks", pod: pod("p", volume("data", hostPath)), want: Block, wantReason: LocalStorageRequested},
		{name: "in-memory emptyDir does not block", pod: pod("p", volume("shm", memoryDir)), want: Move},
		{name: "configMap volume does not block", pod: pod("p", volume("cfg", configMap)), want: Move},
		{name: "emptyDir moves without skip-nodes-with-local-storage", pod: pod("p", volume("scratch", emptyDir)),
			opts: &Options{SkipNodesWithSystemPods: true, SkipNodesWithCustomControllerPods: true}, want: Move},
		{name: "local volumes all listed in safe-to-evict-local-volumes move",
			pod: pod("p", volume("scratch", emptyDir), volume("data", hostPath), annotated(SafeToEvictLocalVolumesAnnotation, "scratch, data")), want: Move},
		{name: "a local volume missing from safe-to-evict-local-volumes blocks",
			pod:  pod("p", volume("scratch", emptyDir), volume("data", hostPath), annotated(SafeToEvictLocalVolumesAnnotation, "scratch")),
			want: Block, wantReason: LocalStorageRequested},
		{name: "emptyDir moves with safe-to-evict true", pod: pod("p", volume("scratch", emptyDir), annotated(SafeToEvictAnnotation, "true")), want: Move},
		{name: "kube-system pod without PDB blocks", pod: pod("coredns", inKubeSystem),
			want: Block, wantReason: UnmovableKubeSystemPod, wantMessage: "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: coredns"},
		{name: "kube-system pod with a PDB moves", pod: pod("coredns", inKubeSystem),
			pdbs: []*policyv1.PodDisruptionBudget{pdb(metav1.NamespaceSystem, "dns", 1, map[string]string{"app": "web"})}, want: Move},
		{name: "kube-system pod with a PDB of another namespace blocks", pod: pod("coredns", inKubeSystem),
			pdbs: []*policyv1.PodDisruptionBudget{pdb("ns", "dns", 1, map[string]string{"app": "web"})}, want: Block, wantReason: UnmovableKubeSystemPod},
		{name: "kube-system pod moves without skip-nodes-with-system-pods", pod: pod("coredns", inKubeSystem),
			opts: &Options{SkipNodesWithLocalStorage: true, SkipNodesWithCustomControllerPods: true}, want: Move},
		{name: "kube-system pod moves with safe-to-evict true", pod: pod("coredns", inKubeSystem, annotated(SafeToEvictAnnotation, "true")), want: Move},
		{name: "PDB allowing no disruption blocks", pod: pod("p"),
			pdbs: []*policyv1.PodDisruptionBudget{pdb("ns", "web", 0, map[string]string{"app": "web"})},
			want: Block, wantReason: NotEnoughPdb, wantMessage: "not enough pod disruption budget to move ns/p"},
		{name: "PDB with an empty selector covers every pod of its namespace", pod: pod("p"),
			pdbs: []*policyv1.PodDisruptionBudget{pdb("ns", "all", 0, nil)}, want: Block, wantReason: NotEnoughPdb},
		{name: "PDB selecting other pods does not block", pod: pod("p"),
			pdbs: []*policyv1.PodDisruptionBudget{pdb("ns", "db", 0, map[string]string{"app": "db"})}, want: Move},
		{name: "PDB with an unreadable selector blocks the pods of its namespace, naming it", pod: pod("p"),
			pdbs: []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "ns"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Almost"}}}}}},
			want: Block, wantReason: UnexpectedError, wantMessage: "PodDisruptionBudget ns/bad: spec.selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			if tc.opts != nil {
				opts = *tc.opts
			}
			got := NewChecker(opts, tc.pdbs, now).Pod(tc.pod)
			if got.Outcome != tc.want || got.Reason != tc.wantReason {
				t.Fatalf("Pod() = %+v, want outcome %d reason %q", got, tc.want, tc.wantReason)
			}
			if !strings.Contains(got.Message, tc.wantMessage) {
				t.Errorf("message %q does not contain %q", got.Message, tc.wantMessage)
			}
		})
	}
}

func node(name string, annotations map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestNode(t *testing.T) {
	tests := []struct {
		name        string
		node        *v1.Node
		pods        []*v1.Pod
		pdbs        []*policyv1.PodDisruptionBudget
		wantMove    int
		wantEvict   int
		wantBlocked string // Blocked.String(), "" when removable
	}{
		{name: "ordinary node drains", node: node("n1", nil), pods: []*v1.Pod{pod("a"), pod("b"), pod("ds", owner("DaemonSet"))}, wantMove: 2},
		{name: "scale-down-disabled annotation keeps the node", node: node("n1", map[string]string{ScaleDownDisabledAnnotation: "true"}),
			pods: []*v1.Pod{pod("a")}, wantBlocked: `ScaleDownDisabledAnnotation: node n1 is annotated cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`},
		{name: "draxr's alias keeps the node", node: node("n1", map[string]string{DraxrScaleDownDisabledAnnotation: "true"}),
			wantBlocked: `ScaleDownDisabledAnnotation: node n1 is annotated draxr.dev/scale-down-disabled: "true"`},
		{name: "scale-down-disabled other than true does not keep the node", node: node("n1", map[string]string{ScaleDownDisabledAnnotation: "false"}),
			pods: []*v1.Pod{pod("a")}, wantMove: 1},
		{name: "one blocking pod keeps the node and is named", node: node("n1", nil),
			pods: []*v1.Pod{pod("a"), pod("b", volume("scratch", emptyDir))}, wantBlocked: "BlockedByPod: LocalStorageRequested: pod with local storage present: b"},
		{name: "on-completion pod keeps the node", node: node("n1", nil),
			pods: []*v1.Pod{pod("batch", annotated(SafeToEvictAnnotation, "on-completion"))}, wantBlocked: "BlockedByOnCompletionPod: SafeToEvictOnCompletion"},
		{name: "DaemonSet pod with enable-ds-eviction is evicted, not moved", node: node("n1", nil),
			pods: []*v1.Pod{pod("ds", owner("DaemonSet"), annotated(EnableDSEvictionAnnotation, "true"))}, wantEvict: 1},
		{name: "two pods of one node under a PDB allowing one keep the node", node: node("n1", nil), pods: []*v1.Pod{pod("a"), pod("b")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("ns", "web", 1, map[string]string{"app": "web"})}, wantBlocked: "BlockedByPod: NotEnoughPdb: not enough pod disruption budget to move ns/b"},
		{name: "two pods under a PDB allowing two drain", node: node("n1", nil), pods: []*v1.Pod{pod("a"), pod("b")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("ns", "web", 2, map[string]string{"app": "web"})}, wantMove: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewChecker(DefaultOptions(), tc.pdbs, now).Node(tc.node, tc.pods)
			got := ""
			if d.Blocked != nil {
				got = d.Blocked.String()
			}
			if (tc.wantBlocked == "") != (got == "") || !strings.HasPrefix(got, tc.wantBlocked) {
				t.Fatalf("blocked = %q, want %q", got, tc.wantBlocked)
			}
			if len(d.Move) != tc.wantMove || len(d.Evict) != tc.wantEvict {
				t.Errorf("move %d evict %d, want %d and %d", len(d.Move), len(d.Evict), tc.wantMove, tc.wantEvict)
			}
		})
	}
}

// The budget is shared by the batch: a PDB allowing one disruption lets
// one node of two go, and only once that node is committed.
func TestPDBBudgetAcrossBatch(t *testing.T) {
	c := NewChecker(DefaultOptions(), []*policyv1.PodDisruptionBudget{pdb("ns", "web", 1, map[string]string{"app": "web"})}, now)
	first := c.Node(node("n1", nil), []*v1.Pod{pod("a")})
	if first.Blocked != nil {
		t.Fatalf("first node blocked: %v", first.Blocked)
	}
	if again := c.Node(node("n2", nil), []*v1.Pod{pod("b")}); again.Blocked != nil {
		t.Fatalf("before Commit the budget is untouched, got %v", again.Blocked)
	}
	c.Commit(first)
	second := c.Node(node("n2", nil), []*v1.Pod{pod("b")})
	if second.Blocked == nil || second.Blocked.PodReason != NotEnoughPdb {
		t.Fatalf("second node after the first took the budget: %+v, want NotEnoughPdb", second.Blocked)
	}
}
