package soak

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/test/controlplane"
)

// nodeBackend makes the soak's nodes and plays their kubelets: the one
// part to swap for kwok (its controllers, its provider's configuration,
// its controller running pods).
type nodeBackend interface {
	name() string
	// controllers are the control plane's controllers (nil: the defaults).
	controllers() []string
	// supports says whether the backend can give a group this behaviour.
	supports(k groupKind) bool
	// configure puts the node groups where the provider reads them and
	// returns the autoscaler's provider flags.
	configure(ctx context.Context, cp *controlplane.ControlPlane, dir string, gs []group, tm timings) ([]string, error)
	// start runs what stands in for kubelets until ctx ends.
	start(ctx context.Context, cp *controlplane.ControlPlane) error
}

// activeGroups are the groups the backend can make.
func activeGroups(b nodeBackend) []group {
	var out []group
	for _, g := range groups() {
		if b.supports(g.kind) {
			out = append(out, g)
		}
	}
	return out
}

// localBackend is the local cloud provider: the autoscaler creates Node
// objects and turns them Ready itself; nothing runs pods, so the backend
// does a kubelet's part: it marks a bound Job pod Succeeded once its
// runtime has passed, and removes a terminating bound pod (as a kubelet
// does once the container stopped) after terminationDelay.
type localBackend struct{}

const terminationDelay = 2 * time.Second

func (localBackend) name() string {
	return "local provider (Node objects made Ready by the autoscaler)"
}

func (localBackend) controllers() []string { return nil }

func (localBackend) supports(groupKind) bool { return true }

func (localBackend) configure(_ context.Context, _ *controlplane.ControlPlane, dir string, gs []group, tm timings) ([]string, error) {
	path, err := writeNodeGroups(dir, gs)
	if err != nil {
		return nil, err
	}
	return []string{"--cloud-provider=local", "--node-group-config=" + path,
		"--local-node-ready-delay=" + tm.readyDelay.String(), "--local-slices-delay=" + tm.slicesDelay.String()}, nil
}

func (localBackend) start(ctx context.Context, cp *controlplane.ControlPlane) error {
	client := cp.Client
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	pods := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	due := map[string]time.Time{} // namespace/name -> when it finishes
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { noteJobPod(obj, &mu, due) },
		UpdateFunc: func(_, obj any) { noteJobPod(obj, &mu, due) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		now := time.Now()
		mu.Lock()
		var ready []string
		for k, t := range due {
			if now.After(t) {
				ready = append(ready, k)
				delete(due, k)
			}
		}
		mu.Unlock()
		for _, k := range ready {
			if name, ok := strings.CutPrefix(k, terminatingPrefix); ok {
				ns, pod, _ := strings.Cut(name, "/")
				err := client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					due[k] = now.Add(time.Second)
					mu.Unlock()
				}
				continue
			}
			obj, ok, _ := pods.GetStore().GetByKey(k)
			if !ok {
				continue
			}
			p := obj.(*v1.Pod).DeepCopy()
			p.Status.Phase = v1.PodSucceeded
			if _, err := client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				// Conflicts and an API server restarting: try again later.
				mu.Lock()
				due[k] = now.Add(time.Second)
				mu.Unlock()
			}
		}
	}, 500*time.Millisecond)
	return nil
}

func noteJobPod(obj any, mu *sync.Mutex, due map[string]time.Time) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return
	}
	if p.DeletionTimestamp != nil {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := due[terminatingKey(p)]; !ok {
			due[terminatingKey(p)] = time.Now().Add(terminationDelay)
		}
		return
	}
	secs, err := strconv.Atoi(p.Annotations[runtimeAnnotation])
	if err != nil {
		return
	}
	k := p.Namespace + "/" + p.Name
	mu.Lock()
	defer mu.Unlock()
	if _, ok := due[k]; !ok {
		due[k] = time.Now().Add(time.Duration(secs) * time.Second)
	}
}

const terminatingPrefix = "terminating:"

func terminatingKey(p *v1.Pod) string { return terminatingPrefix + p.Namespace + "/" + p.Name }
