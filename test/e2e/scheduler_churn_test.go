package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// churnBindBudget is how long a pod that can bind may take after the class
// change that made it possible: the scheduler's backoff (at most 10 s)
// plus a cycle. A pod the scheduler failed to retry waits for the
// unschedulable queue's 5-minute flush instead.
const churnBindBudget = 15 * time.Second

// The KEP's migration path while classes change, with pods already
// pending: a class's extendedResourceName cleared and re-added, the class
// deleted and recreated, a newer class taking over the name, in a seeded
// random order. Every pod that can bind binds within churnBindBudget of
// the change that made it possible, and no bound pod lacks its claim and
// device. The same churn on the stock plugins is printed beside it.
// DRAXR_CHURN_SEED and DRAXR_CHURN_ROUNDS change the run.
func TestSchedulerClassChurn(t *testing.T) {
	seed, rounds := churnSettings(t)
	e := newEnvWithin(t, "churn", 6*time.Minute)
	got := runChurn(e, "", seed, rounds)

	stockEnv := newEnvWithin(t, "churnstock", 6*time.Minute)
	opts := schedulerOptions("")
	opts.Config = filepath.Join(root, "scheduler/deploy/stock-scheduler-config.yaml")
	opts.Name = "stock-scheduler-churn"
	stop, err := cp.StartScheduler(stockEnv.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	stock := runChurn(stockEnv, "stock-scheduler", seed, rounds)

	t.Logf("class churn, seed %d, %d rounds: draxr-scheduler %s", seed, rounds, got)
	t.Logf("class churn, seed %d, %d rounds: stock scheduler  %s", seed, rounds, stock)
	fmt.Printf("scheduler churn: seed %d, %d rounds; draxr-scheduler: %s; stock: %s\n", seed, rounds, got, stock)
	if len(got.stuck) > 0 {
		t.Errorf("draxr-scheduler: %d pods not bound within %v of the change that made them bindable: %s",
			len(got.stuck), churnBindBudget, strings.Join(got.stuck, "; "))
	}
	if len(got.withoutDevices) > 0 {
		t.Errorf("draxr-scheduler: %d pods bound without their claim and device: %s",
			len(got.withoutDevices), strings.Join(got.withoutDevices, "; "))
	}
	if got.bound == 0 {
		t.Error("draxr-scheduler bound no pod: the churn checked nothing")
	}
}

func churnSettings(t *testing.T) (seed uint64, rounds int) {
	seed, rounds = 5004, 8
	if s := os.Getenv("DRAXR_CHURN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DRAXR_CHURN_SEED=%q: %v", s, err)
		}
		seed = v
	}
	if s := os.Getenv("DRAXR_CHURN_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("DRAXR_CHURN_ROUNDS=%q: want a positive number", s)
		}
		rounds = v
	}
	return seed, rounds
}

// churnResult is what one churn saw.
type churnResult struct {
	created, bound int
	slowest        time.Duration
	stuck          []string // pod: how long it waited, the step that made it bindable
	withoutDevices []string // pod: what it lacks
}

func (r churnResult) String() string {
	return fmt.Sprintf("%d of %d pods bound, slowest %.1fs after its change, %d stuck past %v, %d bound without devices",
		r.bound, r.created, r.slowest.Seconds(), len(r.stuck), churnBindBudget, len(r.withoutDevices))
}

// churn drives one scheduler's classes and pods in e.
type churn struct {
	e         *env
	scheduler string
	rng       *rand.Rand
	// mapped holds, per class that exists, whether it names e.resource.
	mapped map[string]bool
	newer  int // classes made to outrank the others
	pods   int
	result churnResult
}

func runChurn(e *env, scheduler string, seed uint64, rounds int) churnResult {
	e.t.Helper()
	c := &churn{e: e, scheduler: scheduler, rng: rand.New(rand.NewPCG(seed, 5004)), mapped: map[string]bool{}}
	// Two nodes of 4 devices; a round never asks more than 8.
	e.draNode(e.name+"-a", e.driver, 4)
	e.draNode(e.name+"-b", e.driver, 4)
	c.createClass(e.name+"-gpu", true)
	for round := 0; round < rounds; round++ {
		c.round(round)
	}
	for name := range c.mapped {
		_ = cp.Client.ResourceV1().DeviceClasses().Delete(e.ctx, name, metav1.DeleteOptions{})
	}
	return c.result
}

// round takes the name away, creates pods that must wait, gives the name
// back (sometimes with pods created at the same moment), optionally lets a
// newer class outrank the winner, then checks and frees every pod.
func (c *churn) round(round int) {
	c.unmap()
	var pending []string
	for range 1 + c.rng.IntN(3) {
		pending = append(pending, c.createPod(round))
	}
	// Let the scheduler try them and park them as unschedulable.
	time.Sleep(time.Duration(300+c.rng.IntN(1200)) * time.Millisecond)
	step := c.remap()
	changed := time.Now()
	if c.rng.IntN(2) == 0 { // pods arriving with the change
		pending = append(pending, c.createPod(round))
	}
	if c.rng.IntN(3) == 0 { // a newer class takes over while mapped
		time.Sleep(time.Duration(c.rng.IntN(200)) * time.Millisecond)
		c.outrank()
		step += ", then outranked by " + c.lastNewer()
		pending = append(pending, c.createPod(round))
	}
	c.waitBound(pending, changed, fmt.Sprintf("round %d: %s", round, step))
	c.checkDevices()
	c.deletePods(pending)
}

func (c *churn) createPod(round int) string {
	c.pods++
	c.result.created++
	name := fmt.Sprintf("r%d-p%d", round, c.pods)
	c.e.podFor(c.scheduler, name, c.e.resource, 1)
	return name
}

// unmap leaves no class naming the resource: each naming class has its
// name cleared or is deleted.
func (c *churn) unmap() {
	for _, name := range c.sortedClasses() {
		if !c.mapped[name] {
			continue
		}
		if c.rng.IntN(2) == 0 {
			c.setName(name, false)
		} else {
			c.deleteClass(name)
		}
	}
}

// remap makes one class name the resource again and says how.
func (c *churn) remap() string {
	base := c.e.name + "-gpu"
	mapped, exists := c.mapped[base]
	switch r := c.rng.IntN(3); {
	case exists && !mapped && r < 2:
		c.setName(base, true)
		return "name re-added to " + base
	case !exists && r < 2:
		c.createClass(base, true)
		return base + " recreated with the name"
	default:
		c.outrank()
		return "new class " + c.lastNewer() + " names it"
	}
}

func (c *churn) outrank() {
	c.newer++
	c.createClass(c.lastNewer(), true)
}

func (c *churn) lastNewer() string { return fmt.Sprintf("%s-newer-%d", c.e.name, c.newer) }

func (c *churn) sortedClasses() []string {
	var names []string
	for name := range c.mapped {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (c *churn) createClass(name string, withName bool) {
	c.e.t.Helper()
	var explicit v1.ResourceName
	if withName {
		explicit = c.e.resource
	}
	// Recreating a class just deleted: wait until the API server has let
	// go of the old object.
	err := wait.PollUntilContextTimeout(c.e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cl := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", c.e.driver)}}},
		}}
		if explicit != "" {
			cl.Spec.ExtendedResourceName = ptr.To(string(explicit))
		}
		_, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, cl, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		c.e.t.Fatalf("create DeviceClass %s: %v", name, err)
	}
	c.mapped[name] = withName
}

func (c *churn) setName(name string, withName bool) {
	c.e.t.Helper()
	if withName {
		cl, err := cp.Client.ResourceV1().DeviceClasses().Get(c.e.ctx, name, metav1.GetOptions{})
		if err != nil {
			c.e.t.Fatal(err)
		}
		cl.Spec.ExtendedResourceName = ptr.To(string(c.e.resource))
		if _, err := cp.Client.ResourceV1().DeviceClasses().Update(c.e.ctx, cl, metav1.UpdateOptions{}); err != nil {
			c.e.t.Fatal(err)
		}
	} else {
		c.e.clearExtendedResourceName(name)
	}
	c.mapped[name] = withName
}

func (c *churn) deleteClass(name string) {
	c.e.t.Helper()
	if err := cp.Client.ResourceV1().DeviceClasses().Delete(c.e.ctx, name, metav1.DeleteOptions{}); err != nil {
		c.e.t.Fatal(err)
	}
	delete(c.mapped, name)
}

// waitBound waits for every pod, recording those not bound within the
// budget from changed.
func (c *churn) waitBound(pods []string, changed time.Time, step string) {
	left := slices.Clone(pods)
	deadline := changed.Add(churnBindBudget)
	for len(left) > 0 && time.Now().Before(deadline) && c.e.ctx.Err() == nil {
		list, err := cp.Client.CoreV1().Pods(c.e.ns).List(c.e.ctx, metav1.ListOptions{})
		if err != nil {
			c.e.t.Fatal(err)
		}
		now := time.Now()
		for _, p := range list.Items {
			if i := slices.Index(left, p.Name); i >= 0 && p.Spec.NodeName != "" {
				left = slices.Delete(left, i, i+1)
				c.result.bound++
				c.result.slowest = max(c.result.slowest, now.Sub(changed))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, name := range left {
		c.result.stuck = append(c.result.stuck, fmt.Sprintf("%s pending %v after %s", name, churnBindBudget, step))
	}
}

// checkDevices finds bound pods without an allocated extended-resource
// claim holding one device: such a pod would run without its GPU.
func (c *churn) checkDevices() {
	list, err := cp.Client.CoreV1().Pods(c.e.ns).List(c.e.ctx, metav1.ListOptions{})
	if err != nil {
		c.e.t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		if lack := c.lacks(&p); lack != "" {
			c.result.withoutDevices = append(c.result.withoutDevices, p.Name+": "+lack)
		}
	}
}

func (c *churn) lacks(p *v1.Pod) string {
	// The status is written in PreBind, before the binding; give the
	// watch a moment if the list raced it.
	var st *v1.PodExtendedResourceClaimStatus
	_ = wait.PollUntilContextTimeout(c.e.ctx, 100*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cp.Client.CoreV1().Pods(c.e.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		st = got.Status.ExtendedResourceClaimStatus
		return st != nil, nil
	})
	if st == nil {
		return fmt.Sprintf("bound to %s with no extendedResourceClaimStatus", p.Spec.NodeName)
	}
	claim, err := cp.Client.ResourceV1().ResourceClaims(c.e.ns).Get(c.e.ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("claim %s: %v", st.ResourceClaimName, err)
	}
	if got := devices(claim); len(got) != 1 || !strings.HasPrefix(got[0], p.Spec.NodeName+"/") {
		return fmt.Sprintf("claim %s holds %v on node %s, want one device of that node", claim.Name, got, p.Spec.NodeName)
	}
	return ""
}

// deletePods removes the round's pods and waits for their claims to go,
// so the next round has every device free.
func (c *churn) deletePods(pods []string) {
	for _, name := range pods {
		c.e.deletePod(name)
	}
	err := wait.PollUntilContextTimeout(c.e.ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		claims, err := cp.Client.ResourceV1().ResourceClaims(c.e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pods, err := cp.Client.CoreV1().Pods(c.e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		return len(claims.Items) == 0 && len(pods.Items) == 0, nil
	})
	if err != nil {
		c.e.t.Fatalf("the round's pods and claims were not removed: %v", err)
	}
}
