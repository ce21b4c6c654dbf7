package app

import (
	"context"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/simulator/expander"
)

// --expander=priority without --expander-priorities reads CA's ConfigMap
// in --namespace; with the file, the file decides.
func TestPriorityExpanderSource(t *testing.T) {
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: core.PriorityConfigMapName, Namespace: "autoscaling"},
		Data:       map[string]string{core.PriorityConfigMapKey: "100:\n  - spot\n1:\n  - .*\n"},
	})
	choices := []expander.Option{{Group: "on-demand", PodCount: 1}, {Group: "gpu-spot", PodCount: 1, Waste: 0.9}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	o := &options{expander: "priority,least-waste", namespace: "autoscaling"}
	exp, factory, err := newExpander(ctx, o, client, record.NewFakeRecorder(10))
	if err != nil || factory == nil {
		t.Fatalf("newExpander = %v, %v; want a ConfigMap-backed expander", factory, err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if got := exp.Best(choices); got.Group != "gpu-spot" {
		t.Errorf("ConfigMap priorities: chose %q, want gpu-spot (priority 100)", got.Group)
	}

	file := writeTemp(t, "1:\n  - gpu-spot\n100:\n  - on-demand\n")
	o.expanderPriorities = file
	exp, factory, err = newExpander(ctx, o, client, record.NewFakeRecorder(10))
	if err != nil || factory != nil {
		t.Fatalf("with a file: newExpander = %v, %v; want the file's expander", factory, err)
	}
	if got := exp.Best(choices); got.Group != "on-demand" {
		t.Errorf("file priorities: chose %q, want on-demand", got.Group)
	}
	if _, _, err := newExpander(ctx, &options{expander: "priority", expanderPriorities: file + ".missing"}, client, nil); err == nil ||
		!strings.Contains(err.Error(), "--expander-priorities") {
		t.Errorf("missing file: %v, want an --expander-priorities error", err)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := t.TempDir() + "/priorities.yaml"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
