package core

import (
	"context"
	"testing"

	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/scaledown"
)

// ExplainScaleDown answers "why is this node not removed?" for every
// managed node with the loop's own rules, and changes nothing.
func TestExplainScaleDown(t *testing.T) {
	disabled := cpuNode("disabled")
	disabled.Annotations = map[string]string{drainability.ScaleDownDisabledAnnotation: "true"}
	e := newSDEnv(t, ScaleDownActuation{}, cpuNode("busy"), cpuNode("light"), disabled, cpuNode("other-x"),
		rsPod("big", "busy", 5000), rsPod("a", "light", 1000), rsPod("b", "disabled", 100))
	e.client.ClearActions()
	got, err := e.a.ExplainScaleDown(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct {
		v    scaledown.Verdict
		code scaledown.Code
	}
	want := map[string]verdict{
		"busy":     {scaledown.Kept, scaledown.NotUnderutilized},
		"disabled": {scaledown.Kept, "ScaleDownDisabledAnnotation"},
		"light":    {scaledown.Removable, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("verdicts %+v, want one for each of the group's 3 nodes (none for other-x, of no group)", got)
	}
	for _, v := range got {
		w, ok := want[v.Node]
		if !ok || v.Verdict != w.v || v.Code != w.code || v.NodeGroup != "cpu" || v.Reason == "" {
			t.Errorf("%s: %s %s (%s) in %s; want %s %s with a reason", v.Node, v.Verdict, v.Code, v.Reason, v.NodeGroup, w.v, w.code)
		}
	}
	if w := writes(e.client.Actions()); len(w) > 0 {
		t.Errorf("ExplainScaleDown wrote %v", w)
	}
}
