// A group's instances: its Machines (or a MachinePool's provider IDs)
// and the state CA reads from each.

package clusterapi

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// MachineState is where a group's machine is in its life.
type MachineState string

// Machine states, from the Machine's phase and deletion timestamp.
const (
	MachineRunning      MachineState = "Running"
	MachineProvisioning MachineState = "Provisioning"
	MachineFailed       MachineState = "Failed"
	MachineDeleting     MachineState = "Deleting"
)

// MachineInstance is one Machine of a group.
type MachineInstance struct {
	cloudprovider.Instance
	Machine string // namespace/name
	State   MachineState
	// Reason is the Machine's failure message when it failed.
	Reason string
}

// machinesByOwner groups the Machines by the group that owns them, keyed
// Kind/namespace/name: a MachineSet's and a MachinePool's own, and a
// MachineDeployment's through its MachineSets.
func machinesByOwner(machines, sets []unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	setOwner := map[string]string{} // ns/machineset -> ns/machinedeployment
	for _, s := range sets {
		for _, ref := range s.GetOwnerReferences() {
			if ref.Kind == capi.MachineDeployment {
				setOwner[s.GetNamespace()+"/"+s.GetName()] = s.GetNamespace() + "/" + ref.Name
			}
		}
	}
	machinesOf := map[string][]*unstructured.Unstructured{} // Kind/ns/name -> machines
	for i := range machines {
		m := &machines[i]
		for _, ref := range m.GetOwnerReferences() {
			key := m.GetNamespace() + "/" + ref.Name
			switch ref.Kind {
			case capi.MachineSet:
				machinesOf[capi.MachineSet+"/"+key] = append(machinesOf[capi.MachineSet+"/"+key], m)
				if md, ok := setOwner[key]; ok {
					machinesOf[capi.MachineDeployment+"/"+md] = append(machinesOf[capi.MachineDeployment+"/"+md], m)
				}
			case capi.MachinePool:
				machinesOf[capi.MachinePool+"/"+key] = append(machinesOf[capi.MachinePool+"/"+key], m)
			}
		}
	}
	return machinesOf
}

// instances are the group's Machines as CA reads them, by name.
func (p *Provider) instances(machines []*unstructured.Unstructured, nodes map[string]*v1.Node) []MachineInstance {
	var out []MachineInstance
	for _, m := range machines {
		in := MachineInstance{Machine: m.GetNamespace() + "/" + m.GetName()}
		in.ProviderID, _, _ = unstructured.NestedString(m.Object, "spec", "providerID")
		if in.ProviderID == "" {
			in.ProviderID = PendingProviderIDPrefix + in.Machine
		}
		if n := nodes[in.ProviderID]; n != nil {
			in.NodeName = n.Name
		}
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		// The instance status is CA's reading of a Machine: a failed one
		// is an instance still "creating" with error info, so the failure
		// model deletes it and backs the group off.
		switch {
		case m.GetDeletionTimestamp() != nil || phase == "Deleting" || phase == "Deleted":
			in.State = MachineDeleting
			in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
		case phase == "Failed":
			in.State = MachineFailed
			in.Reason = failureMessage(m)
			in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
				ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass,
					ErrorCode: "ProvisioningFailed", ErrorMessage: in.Reason}}
		case in.NodeName == "":
			in.State = MachineProvisioning
			in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
		default:
			in.State = MachineRunning
			in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Machine < out[j].Machine })
	return out
}

// poolInstances are a MachinePool's spec.providerIDList entries: Running
// once a node has the ID, Provisioning before. They have no Machine.
func poolInstances(u *unstructured.Unstructured, nodes map[string]*v1.Node) []MachineInstance {
	ids, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "providerIDList")
	var out []MachineInstance
	for _, id := range ids {
		if id == "" {
			continue
		}
		in := MachineInstance{Instance: cloudprovider.Instance{ProviderID: id,
			Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}}, State: MachineProvisioning}
		if n := nodes[id]; n != nil {
			in.NodeName = n.Name
			in.State, in.Status = MachineRunning, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProviderID < out[j].ProviderID })
	return out
}

// failureMessage reads v1beta2's deprecated v1beta1 failure fields.
func failureMessage(m *unstructured.Unstructured) string {
	for _, path := range [][]string{{"status", "deprecated", "v1beta1", "failureMessage"}, {"status", "failureMessage"}} {
		if s, ok, _ := unstructured.NestedString(m.Object, path...); ok && s != "" {
			return s
		}
	}
	return "machine failed"
}
