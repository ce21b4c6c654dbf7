package core

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/test/fakeprovider"
)

// A booking that fails while the loop's shared simulation is built, after
// the requests' step returned (here the process is told to stop in the
// middle of the loop), is one of the loop's errors: it is returned, and
// the status ConfigMap's last error names the request.
func TestBookingErrorAfterTheRequestsStepReachesTheLoopError(t *testing.T) {
	e := newFailureEnv(t)
	e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
	store := withRequests(t, e, gpuPodTemplate("train"))
	store.add(t, provReq("train", provreq.BestEffortAtomic, "train", 16, e.now))
	if _, err := e.a.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.at(time.Second)
	pending := unschedulablePods(1)[0].(*v1.Pod)
	if _, err := e.client.CoreV1().Pods("default").Create(e.ctx, pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPods(t, e, 1)

	stopped, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := e.a.RunOnce(stopped)
	const want = "book ProvisioningRequest default/train: context canceled"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("loop error %v, want it to contain %q", err, want)
	}
	if _, status := readStatus(t, e.a); !strings.Contains(status.LastError, want) {
		t.Errorf("status last error %q, want it to contain %q", status.LastError, want)
	}
}
