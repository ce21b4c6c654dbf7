package core

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// writes are the client's calls that change something, but for the
// status ConfigMap and events.
func writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		if a.GetResource().Resource == "events" {
			continue
		}
		if a.GetResource().Resource == "configmaps" {
			if n, ok := a.(interface{ GetName() string }); ok && n.GetName() == DryRunStatusConfigMapName {
				continue
			}
			if c, ok := a.(k8stesting.CreateAction); ok {
				if m, ok := c.GetObject().(*v1.ConfigMap); ok && m.Name == DryRunStatusConfigMapName {
					continue
				}
			}
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	return out
}

// A dry run decides what a real loop decides and changes nothing: no
// provider call (the mock refuses any), no taint, eviction or deletion;
// the status ConfigMap it writes is its own, its events are on it.
func TestDryRunChangesNothing(t *testing.T) {
	t.Run("scale-down", func(t *testing.T) {
		e := newSDEnvDryRun(t, ScaleDownActuation{}, true, cpuNode("keep"), cpuNode("light"), rsPod("big", "keep", 5000), rsPod("a", "light", 1000))
		e.group.EXPECT().DeleteNodes(gomock.Any(), gomock.Any()).Times(0)
		e.client.ClearActions()
		res := e.loop(t)
		if !res.DryRun || len(res.Removed) != 1 || res.Removed[0] != "light" {
			t.Errorf("dry run: removed %v (dry run %v), want light as a real loop removes it", res.Removed, res.DryRun)
		}
		if w := writes(e.client.Actions()); len(w) > 0 {
			t.Errorf("dry run wrote %v", w)
		}
		if len(e.taints(t, "light")) != 0 {
			t.Errorf("light tainted in a dry run: %v", e.taints(t, "light"))
		}
		evs := events(e.recorder)
		found := false
		for _, ev := range evs {
			if !strings.Contains(ev, "dry run") {
				t.Errorf("event not marked dry run: %s", ev)
			}
			if strings.Contains(ev, "would remove node light") {
				found = true
			}
		}
		if !found {
			t.Errorf("no event says light would be removed: %v", evs)
		}
	})
	t.Run("scale-up", func(t *testing.T) {
		a, provider, group, recorder := setup(t, unschedulablePods(20)...)
		group.EXPECT().IncreaseSize(gomock.Any(), gomock.Any()).Times(0)
		b := New(Config{Client: a.cfg.Client, View: a.cfg.View, Provider: a.cfg.Provider, Expander: a.cfg.Expander,
			Recorder: recorder, DryRun: true, StatusNamespace: "kube-system", StatusName: DryRunStatusConfigMapName})
		provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
		client := a.cfg.Client.(*fake.Clientset)
		client.ClearActions()
		res, err := b.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if w := writes(client.Actions()); len(w) > 0 {
			t.Errorf("dry run wrote %v", w)
		}
		if res.ScaleUp == nil || res.ScaleUp.NewNodes != 3 || len(res.WouldCall) != 1 || res.WouldCall[0] != "IncreaseSize gpu +3" {
			t.Errorf("dry run: scale-up %+v, calls %v; want gpu +3 recorded, not made", res.ScaleUp, res.WouldCall)
		}
		for _, ev := range events(recorder) {
			if strings.Contains(ev, "TriggeredScaleUp") && !strings.Contains(ev, "dry run: Pod ") {
				t.Errorf("a pod's event not on the status ConfigMap, marked dry run: %s", ev)
			}
		}
	})
}
