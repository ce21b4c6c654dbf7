package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/test/proc"
)

// A group whose nodes register but never turn Ready is given up after
// --max-node-provision-time: its nodes are deleted, a ScaleUpTimedOut
// event is recorded, and the pending pods get a scale-up of the next
// group.
func TestAutoscalerGivesUpOnNodesThatNeverTurnReady(t *testing.T) {
	e := newEnv(t, "asnever")
	e.class("asnever-gpu", e.driver, e.resource)
	groups := e.nodeGroups(
		groupSpec{name: "asnever-broken", max: 5, draDevices: 8,
			annotations: map[string]string{local.NodeReadyDelayAnnotation: "never"}},
		groupSpec{name: "asnever-fallback", max: 5, draDevices: 8},
	)
	prio := filepath.Join(t.TempDir(), "priorities.yaml")
	if err := os.WriteFile(prio, []byte("20:\n- .*-broken\n10:\n- .*-fallback\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.autoscaler(groups, "--expander=priority", "--expander-priorities="+prio,
		"--max-node-provision-time=8s", "--max-node-startup-time=8s")
	e.replicaSet("train", 4, e.resource, 1)
	e.eventually(30*time.Second, "the preferred, broken group grows first", func() error {
		if n := len(e.groupNodes("asnever-broken")); n != 1 {
			return fmt.Errorf("broken group has %d nodes", n)
		}
		return nil
	})
	perNode := e.waitPodsBound(4, 90*time.Second)
	for node := range perNode {
		if !strings.HasPrefix(node, "asnever-fallback-") {
			t.Errorf("pods bound to %s, want only fallback nodes (%v)", node, perNode)
		}
	}
	if n := len(e.groupNodes("asnever-broken")); n != 0 {
		t.Errorf("broken group still has %d nodes, want its never-Ready node given up", n)
	}
	e.eventually(10*time.Second, "a ScaleUpTimedOut event on the status ConfigMap", func() error {
		events, err := cp.Client.CoreV1().Events("kube-system").List(e.ctx, metav1.ListOptions{
			FieldSelector: "reason=ScaleUpTimedOut,involvedObject.name=draxr-autoscaler-status-" + e.name})
		if err != nil {
			return err
		}
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, "asnever-broken") {
				return nil
			}
		}
		return fmt.Errorf("%d ScaleUpTimedOut events, none naming asnever-broken", len(events.Items))
	})
}

// The standby replica stays healthy long past the minute after which it
// used to fail; SIGTERM makes the leader exit 0 and release its lease, so
// the standby leads at once rather than after the lease duration.
func TestAutoscalerStandbyHealthyAndSIGTERMHandsOver(t *testing.T) {
	e := newEnv(t, "asstandby")
	e.class("asstandby-gpu", e.driver, e.resource)
	groups := e.nodeGroups(groupSpec{name: "asstandby-gpu", max: 3, draDevices: 8})
	lease := "draxr-autoscaler-" + e.name
	// CA's 15s/10s/2s lease; health limits far below the window watched
	// below, so a standby judged by the leader's rules would fail in it.
	election := []string{"--leader-elect=true", "--leader-elect-resource-name=" + lease,
		"--max-inactivity=15s", "--max-failing-time=20s", "--max-startup-time=25s"}
	first, firstAddr := e.autoscalerWithAddress(groups, election...)
	second, secondAddr := e.autoscalerWithAddress(groups, election...)

	holderOf := func() (string, error) {
		l, err := cp.Client.CoordinationV1().Leases("kube-system").Get(e.ctx, lease, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return "", fmt.Errorf("no holder")
		}
		return *l.Spec.HolderIdentity, nil
	}
	var leader, standby *proc.Process
	e.eventually(30*time.Second, "a leader", func() error {
		h, err := holderOf()
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(h, fmt.Sprintf("_%d", first.PID())):
			leader, standby = first, second
		case strings.HasSuffix(h, fmt.Sprintf("_%d", second.PID())):
			leader, standby = second, first
		default:
			return fmt.Errorf("holder %q is neither replica", h)
		}
		return nil
	})
	bothHealthy := func() error {
		for _, addr := range []string{firstAddr, secondAddr} {
			if body, err := healthOf(addr); err != nil || body != "OK" {
				return fmt.Errorf("%s/health-check = %q, %v", addr, body, err)
			}
		}
		return nil
	}
	// The lease may be taken before the other replica listens.
	e.eventually(30*time.Second, "both replicas serving", bothHealthy)
	// The old check failed the standby after 5 scan intervals plus a
	// minute (65s here); every health limit above is passed 3 to 5 times.
	e.consistently(80*time.Second, "both replicas healthy", func() error {
		return bothHealthy()
	})

	leader.Stop(10 * time.Second)
	if done, err := leader.Exited(); !done || err != nil {
		t.Fatalf("leader after SIGTERM: exited %v, %v; want exit status 0", done, err)
	}
	// Well under the 15s lease duration: the lease was released.
	e.eventually(6*time.Second, "the standby takes the released lease", func() error {
		h, err := holderOf()
		if err != nil {
			return err
		}
		if !strings.HasSuffix(h, fmt.Sprintf("_%d", standby.PID())) {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
}
