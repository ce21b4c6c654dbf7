package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"draxr.dev/draxr/scheduler/classes"
)

// A pod with only limits: example.com/gpu: 1 on a node whose 2 devices a
// DRA driver publishes is bound, and the scheduler writes the claim and
// the pod status KEP-5004 describes; the implicit name works alike.
func TestExtendedResourceExplicitAndImplicitNames(t *testing.T) {
	e := newEnv(t, "names")
	class := e.class("names-gpu", e.driver, e.resource)
	e.draNode("names-node", e.driver, 2)

	e.pod("explicit", e.resource, 1)
	pod := e.waitExtendedStatus("explicit")
	if pod.Spec.NodeName != "names-node" {
		t.Fatalf("bound to %q", pod.Spec.NodeName)
	}
	claim := e.claimOf(pod)
	if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		t.Errorf("claim annotations = %v", claim.Annotations)
	}
	owner := metav1.GetControllerOf(claim)
	if owner == nil || owner.Kind != "Pod" || owner.UID != pod.UID {
		t.Errorf("claim controller = %+v, want pod %s", owner, pod.UID)
	}
	if got := devices(claim); len(got) != 1 || !strings.HasPrefix(got[0], "names-node/gpu-") {
		t.Errorf("allocated devices = %v, want one device of names-node", got)
	}
	if rf := claim.Status.ReservedFor; len(rf) != 1 || rf[0].UID != pod.UID {
		t.Errorf("reservedFor = %+v", rf)
	}
	want := []v1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: string(e.resource), RequestName: "container-0-request-0"}}
	if got := pod.Status.ExtendedResourceClaimStatus.RequestMappings; !slices.Equal(got, want) {
		t.Errorf("requestMappings = %+v, want %+v", got, want)
	}

	e.pod("implicit", classes.ImplicitName(class.Name), 1)
	implicit := e.claimOf(e.waitExtendedStatus("implicit"))
	if d1, d2 := devices(claim), devices(implicit); len(d2) != 1 || d1[0] == d2[0] {
		t.Errorf("implicit-name pod got %v beside %v, want the other device", d2, d1)
	}
	e.pod("third", e.resource, 1)
	e.waitUnschedulable("third")
}

// A device-plugin node and a DRA node serve the same name; pods land on
// both and the device-plugin pods get no claim.
func TestDevicePluginAndDRANodes(t *testing.T) {
	e := newEnv(t, "mixed")
	e.class("mixed-gpu", e.driver, e.resource)
	e.devicePluginNode("mixed-dp", 2)
	e.draNode("mixed-dra", e.driver, 2)
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		e.pod(name, e.resource, 1)
	}
	perNode := map[string]int{}
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		pod := e.waitBound(name)
		perNode[pod.Spec.NodeName]++
		if pod.Spec.NodeName == "mixed-dp" {
			if pod.Status.ExtendedResourceClaimStatus != nil {
				t.Errorf("pod %s on the device-plugin node has a claim status", name)
			}
		} else if len(devices(e.claimOf(e.waitExtendedStatus(name)))) != 1 {
			t.Errorf("pod %s on the DRA node: want one device", name)
		}
	}
	if perNode["mixed-dp"] != 2 || perNode["mixed-dra"] != 2 {
		t.Errorf("pods per node = %v, want 2 and 2", perNode)
	}
	claims, err := cp.Client.ResourceV1().ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 2 {
		t.Errorf("claims in namespace = %d (%v), want 2 (DRA pods only)", len(claims.Items), err)
	}
}

// Deleting a pod lets the controller-manager remove its claim, and the
// device serves the next pod.
func TestDeletingPodFreesDevice(t *testing.T) {
	e := newEnv(t, "free")
	e.class("free-gpu", e.driver, e.resource)
	e.draNode("free-node", e.driver, 1)
	e.pod("first", e.resource, 1)
	first := e.waitExtendedStatus("first")
	claimName := first.Status.ExtendedResourceClaimStatus.ResourceClaimName
	e.pod("second", e.resource, 1)
	e.waitUnschedulable("second")

	e.deletePod("first")
	if err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx2 context.Context) (bool, error) {
		_, err := cp.Client.ResourceV1().ResourceClaims(e.ns).Get(ctx2, claimName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("claim %s of the deleted pod still exists: %v", claimName, err)
	}
	second := e.waitExtendedStatus("second")
	if got := devices(e.claimOf(second)); len(got) != 1 || got[0] != "free-node/gpu-0" {
		t.Errorf("second pod devices = %v, want the freed free-node/gpu-0", got)
	}
}

// The KEP's migration path: class A maps the name; class B (newer) maps
// it too; clearing the field in A leaves B serving new pods. Upstream's
// cache loses the mapping here; draxr-scheduler must not.
func TestMigrationPath(t *testing.T) {
	e := newEnv(t, "migrate")
	oldDriver, newDriver := "old.migrate.example.com", "new.migrate.example.com"
	a := e.class("migrate-a", oldDriver, e.resource)
	e.draNode("migrate-old", oldDriver, 1)
	e.draNode("migrate-new", newDriver, 2)
	e.pod("before", e.resource, 1)
	if got := devices(e.claimOf(e.waitExtendedStatus("before"))); len(got) != 1 || !strings.HasPrefix(got[0], "migrate-old/") {
		t.Fatalf("before migration: devices %v, want class A's device", got)
	}
	e.classNewerThan(a, "migrate-b", newDriver, e.resource)
	e.clearExtendedResourceName(a.Name)
	e.waitClassesSeen("")
	for _, name := range []string{"after-0", "after-1"} {
		e.pod(name, e.resource, 1)
		if got := devices(e.claimOf(e.waitExtendedStatus(name))); len(got) != 1 || !strings.HasPrefix(got[0], "migrate-new/") {
			t.Errorf("%s: devices %v, want class B's devices", name, got)
		}
	}
	// Class A keeps its implicit name.
	e.pod("implicit-a", classes.ImplicitName("migrate-a"), 1)
	e.waitUnschedulable("implicit-a") // its one device is held by "before"
	e.deletePod("before")
	if got := devices(e.claimOf(e.waitExtendedStatus("implicit-a"))); len(got) != 1 || got[0] != "migrate-old/gpu-0" {
		t.Errorf("implicit-a: devices %v, want migrate-old/gpu-0", got)
	}
}

// The scheduler authenticates as its ServiceAccount, and the shipped RBAC
// is enough for everything above; its log has no authorization failure.
func TestSchedulerRunsAsServiceAccount(t *testing.T) {
	e := newEnv(t, "rbac")
	token, err := cp.ServiceAccountToken(e.ctx, "kube-system", "draxr-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.AdminConfig.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(e.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Username; got != "system:serviceaccount:kube-system:draxr-scheduler" {
		t.Errorf("scheduler identity = %q", got)
	}
	if _, err := c.CoreV1().Secrets("kube-system").List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets as the scheduler: %v, want forbidden (least privilege)", err)
	}
	// Built with version ldflags, so kubectl version reports the pin.
	out, err := goCmd("list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Fatal(err)
	}
	pinned := strings.TrimSpace(string(out))
	if v, err := cp.Client.Discovery().ServerVersion(); err != nil || v.GitVersion != pinned {
		t.Errorf("server version = %v (%v), want %s (go.mod)", v, err, pinned)
	}
	if logs := cp.Logs(); strings.Contains(logs, "is forbidden") {
		t.Errorf("a component hit an authorization error:\n%s", logs)
	}
}
