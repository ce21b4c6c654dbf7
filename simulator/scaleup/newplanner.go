package scaleup

import (
	appsv1 "k8s.io/api/apps/v1"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
)

// Config is what a planner is built from. The autoscaler's loop and
// draxr simulate build theirs through NewPlanner from the same fields, so
// that the CLI plans what the loop does by construction.
type Config struct {
	Groups   []*nodegroup.NodeGroup
	Expander expander.Strategy
	// MaxNodesTotal caps all nodes in the cluster; 0 means no cap.
	MaxNodesTotal int
	// Matcher reads device classes; nil: a new one. The caller keeps it to
	// report class errors after planning.
	Matcher    *dynres.Matcher
	DaemonSets []*appsv1.DaemonSet
	Limits     limits.Options
	// Pods are CA's flags on which pending pods are planned for; nil:
	// every pod of the profile's scheduler, none expendable.
	Pods *Flags
	// Gangs are the gangs among the pods (nil: every pod on its own).
	Gangs *gang.Index
}

// NewPlanner builds the planner over engine: a CapacityBuffer's in-memory pods
// are placed first-fit (their node does not matter), every other pod as
// the scheduler would.
func NewPlanner(engine *placement.Engine, c Config) *Planner {
	p := &Planner{Engine: engine, Groups: c.Groups, Expander: c.Expander, MaxNodesTotal: c.MaxNodesTotal, Matcher: c.Matcher,
		DaemonSets: c.DaemonSets, Limits: c.Limits, FirstFitFor: capacitybuffer.IsBufferPod, Gangs: c.Gangs}
	if p.Matcher == nil {
		p.Matcher = dynres.NewMatcher()
	}
	if c.Pods != nil {
		c.Pods.Apply(p)
	}
	return p
}
