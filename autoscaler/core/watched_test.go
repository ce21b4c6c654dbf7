package core

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// startWatched starts the factory's informers and returns once the
// named resources' watches are open. A fake clientset replays nothing to
// a watch opened late: a change a test makes between an informer's list
// and its watch (a loop tainting a node, evicting a pod) never reached
// the cache, and the test timed out waiting for it on a loaded machine.
func startWatched(ctx context.Context, t *testing.T, client *fake.Clientset, factory informers.SharedInformerFactory, resources ...string) {
	t.Helper()
	var mu sync.Mutex
	open := map[string]bool{}
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		mu.Lock()
		open[action.GetResource().Resource] = true
		mu.Unlock()
		return true, w, nil
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range resources {
			if !open[r] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the informers' watches of %v did not open: %v", resources, err)
	}
}
