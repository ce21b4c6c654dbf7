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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// nodeBackend makes the soak's nodes and plays their kubelets: the one
// part to swap for kwok (its provider flags, its node annotations for a
// never-Ready group, its controller running pods).
type nodeBackend interface {
	name() string
	// autoscalerArgs select and configure the cloud provider.
	autoscalerArgs(nodeGroups string, tm timings) []string
	// groupAnnotations are the NodeGroup annotations giving a group its
	// behaviour (nodes that never turn Ready).
	groupAnnotations(g group) map[string]string
	// start runs what stands in for kubelets until ctx ends: Job pods
	// bound to a node finish after their runtime annotation.
	start(ctx context.Context, client kubernetes.Interface) error
}

// localBackend is the local cloud provider: the autoscaler creates Node
// objects and turns them Ready itself; nothing runs pods, so the backend
// does a kubelet's part: it marks a bound Job pod Succeeded once its
// runtime has passed, and removes a terminating bound pod (as a kubelet
// does once the container stopped) after terminationDelay.
const terminationDelay = 2 * time.Second

type localBackend struct{}

func (localBackend) name() string {
	return "local provider (Node objects made Ready by the autoscaler)"
}

func (localBackend) autoscalerArgs(nodeGroups string, tm timings) []string {
	return []string{"--cloud-provider=local", "--node-group-config=" + nodeGroups,
		"--local-node-ready-delay=" + tm.readyDelay.String(), "--local-slices-delay=" + tm.slicesDelay.String()}
}

func (localBackend) groupAnnotations(g group) map[string]string { return localGroupAnnotations(g) }

func (localBackend) start(ctx context.Context, client kubernetes.Interface) error {
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
