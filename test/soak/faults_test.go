package soak

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/soak/checker"
)

// The faults the soak drives.
const (
	faultKillLeader   = "SIGKILL the leader, restart it"
	faultFailover     = "SIGTERM the leader (failover), restart it"
	faultKillStandby  = "SIGKILL the standby, restart it"
	faultAPIServer    = "restart kube-apiserver"
	faultFlakyCreates = "node creates of plug-flaky fail for 30s"
)

func faultKinds() []string {
	return []string{faultKillLeader, faultFailover, faultKillStandby, faultAPIServer, faultFlakyCreates}
}

// The cloud's failing creates are the API server refusing the group's
// Node objects: a ValidatingAdmissionPolicy, bound while the fault is on,
// so the provider's IncreaseSize gets a real error from a real call.
const failCreatesPolicy = "soak-fail-node-creates"

func failCreatesPolicyObject(group string) *admissionv1.ValidatingAdmissionPolicy {
	expr := fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels) || object.metadata.labels[%q] != %q",
		nodegroup.GroupLabel, nodegroup.GroupLabel, group)
	return &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: failCreatesPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}}}}}},
			Validations: []admissionv1.Validation{{Expression: expr, Message: "soak: the cloud refuses " + group + " nodes for now"}},
		}}
}

// faults drives the faults, one at a time.
type faults struct {
	cp     *controlplane.ControlPlane
	reps   *replicas
	obs    *observer
	record func(string)
	errorf func(format string, args ...any)

	mu         sync.Mutex
	holder     string
	recoveries []time.Duration // fault to the leader's next status write
}

// watchLeader reports each new lease holder to the checker.
func (f *faults) watchLeader(ctx context.Context) {
	for {
		h := leaseHolder(ctx, f.cp.Client)
		f.mu.Lock()
		changed := h != "" && h != f.holder
		if changed {
			f.holder = h
		}
		f.mu.Unlock()
		if changed {
			f.obs.send(checker.Observation{Kind: checker.NewLeader, Name: h})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (f *faults) currentHolder() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder
}

// statusVersion is the status ConfigMap's resourceVersion: only the
// leader writes it, once a loop.
func statusVersion(ctx context.Context, c kubernetes.Interface) string {
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, core.DefaultStatusConfigMapName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return cm.ResourceVersion
}

// awaitRecovery waits until a leader other than oldHolder (any leader
// when oldHolder is "") writes its status after now.
func (f *faults) awaitRecovery(ctx context.Context, what, oldHolder string, since time.Time) {
	deadline := time.Now().Add(2 * time.Minute)
	base := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		h := f.currentHolder()
		if h != "" && h != oldHolder {
			v := statusVersion(ctx, f.cp.Client)
			if base == "" {
				base = v
			} else if v != "" && v != base {
				d := time.Since(since)
				f.mu.Lock()
				f.recoveries = append(f.recoveries, d)
				f.mu.Unlock()
				f.record(fmt.Sprintf("  recovered from %q in %s", what, d.Round(100*time.Millisecond)))
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ctx.Err() == nil {
		f.errorf("no leader wrote its status within 2m of %q", what)
	}
}

func (f *faults) run(ctx context.Context, kind string) error {
	start := time.Now()
	f.record(kind)
	switch kind {
	case faultKillLeader, faultFailover:
		if kind == faultKillLeader {
			// Mid-drain if it can be: the next leader must clean up.
			if node := f.awaitDeletionTaint(ctx, 30*time.Second); node != "" {
				f.record("  while node " + node + " carries " + checker.ToBeDeletedTaint)
			}
			start = time.Now()
		}
		old := f.currentHolder()
		leader := f.reps.byHolder(old)
		if leader == nil {
			f.record("  (no leader to stop: skipped)")
			return nil
		}
		f.obs.send(checker.Observation{Kind: checker.DisruptionStart, Name: kind})
		defer f.obs.send(checker.Observation{Kind: checker.DisruptionEnd, Name: kind})
		if err := f.reps.kill(leader, kind == faultFailover, 2*time.Second); err != nil {
			return err
		}
		f.awaitRecovery(ctx, kind, old, start)
	case faultKillStandby:
		leader := f.reps.byHolder(f.currentHolder())
		standby := f.reps.other(leader)
		if leader == nil || standby == nil {
			f.record("  (no standby: skipped)")
			return nil
		}
		return f.reps.kill(standby, false, 2*time.Second)
	case faultAPIServer:
		f.obs.send(checker.Observation{Kind: checker.DisruptionStart, Name: kind})
		defer f.obs.send(checker.Observation{Kind: checker.DisruptionEnd, Name: kind})
		if err := f.cp.RestartAPIServer(ctx, f.record); err != nil {
			return err
		}
		f.record(fmt.Sprintf("  kube-apiserver ready again after %s", time.Since(start).Round(100*time.Millisecond)))
		f.awaitRecovery(ctx, kind, "", start)
	case faultFlakyCreates:
		if err := f.bindFailCreates(ctx, true); err != nil {
			return err
		}
		time.AfterFunc(30*time.Second, func() {
			if err := f.bindFailCreates(context.Background(), false); err != nil {
				f.errorf("end of %q: %v", kind, err)
				return
			}
			f.record("  node creates of plug-flaky succeed again")
		})
	}
	return nil
}

func (f *faults) bindFailCreates(ctx context.Context, on bool) error {
	c := f.cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	var err error
	for range 120 {
		if on {
			b := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: failCreatesPolicy},
				Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: failCreatesPolicy,
					ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
			_, err = c.Create(ctx, b, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		} else {
			err = c.Delete(ctx, failCreatesPolicy, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		}
		if err == nil {
			return nil
		}
		// The API server may be restarting.
		time.Sleep(time.Second)
	}
	return err
}

// awaitDeletionTaint waits until some node carries the autoscaler's
// deletion taint and returns it ("" after timeout).
func (f *faults) awaitDeletionTaint(ctx context.Context, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, n := range nodes.Items {
				for _, t := range n.Spec.Taints {
					if t.Key == checker.ToBeDeletedTaint {
						return n.Name
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ""
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
