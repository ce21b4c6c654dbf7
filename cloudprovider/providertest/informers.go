package providertest

import (
	"context"
	"testing"

	"k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
)

// StartInformers starts the factory's informers until the test ends and
// waits for their caches, as the autoscaler does before its first loop.
func StartInformers(t *testing.T, factory informers.SharedInformerFactory) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	return ctx
}

// ListCalls counts a fake client's LISTs of resource ("" counts every
// resource's): what a provider reading the informers must not send each
// loop.
func ListCalls(client interface{ Actions() []clienttesting.Action }, resource string) int {
	n := 0
	for _, act := range client.Actions() {
		if act.GetVerb() == "list" && (resource == "" || act.GetResource().Resource == resource) {
			n++
		}
	}
	return n
}
