package input

import "draxr.dev/draxr/simulator/snapshot"

// Snapshot loads the objects into a new snapshot, the one view of the
// cluster the planner and the loop simulate on: classes and templates
// first, then nodes, DeviceTaintRules and slices (tainted by them),
// PodGroups, claims and the running pods. The running pods' scheduler pod
// info is taken from infos (and kept there for the next build) where it
// has them: the autoscaler builds a snapshot every loop from mostly the
// same pods. infos may be nil.
func (o *Objects) Snapshot(infos *snapshot.PodInfos) (*snapshot.Snapshot, error) {
	// Every pending pod may be placed, with a claim of its own (its
	// extended resources' or a template's), in the loop's simulations.
	pending := len(o.PendingPods)
	snap := snapshot.NewSized(len(o.RunningPods)+pending, len(o.ResourceClaims)+pending)
	for _, c := range o.DeviceClasses {
		snap.SetDeviceClass(c)
	}
	for _, t := range o.ResourceClaimTemplates {
		snap.SetResourceClaimTemplate(t)
	}
	for _, n := range o.Nodes {
		if err := snap.AddNode(n); err != nil {
			return nil, err
		}
	}
	snap.SetDeviceTaintRules(o.DeviceTaintRules)
	snap.SetPodGroups(o.PodGroups)
	for _, s := range o.ResourceSlices {
		if err := snap.AddResourceSlice(s); err != nil {
			return nil, err
		}
	}
	snap.SetResourceClaims(o.ResourceClaims, infos)
	if err := snap.AddBoundPods(o.RunningPods, infos); err != nil {
		return nil, err
	}
	return snap, nil
}
