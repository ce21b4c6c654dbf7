package snapshot

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// allocatedDevices is the index the allocator needs: devices held
// exclusively, shared allocations, and consumed capacity. It is kept in step
// with every claim change, so PreFilter never walks all claims.
// Like the scheduler with DRAConsumableCapacity on (default since v1.36), results
// with a share ID count as shared and admin-access results not at all.
type allocatedDevices struct {
	ids      sets.Set[structured.DeviceID]
	shared   sets.Set[structured.SharedDeviceID]
	capacity structured.ConsumedCapacityCollection
}

func newAllocatedDevices() allocatedDevices {
	return allocatedDevices{
		ids:      sets.New[structured.DeviceID](),
		shared:   sets.New[structured.SharedDeviceID](),
		capacity: structured.NewConsumedCapacityCollection(),
	}
}

func (a *allocatedDevices) clone() allocatedDevices {
	return allocatedDevices{ids: a.ids.Clone(), shared: a.shared.Clone(), capacity: a.capacity.Clone()}
}

func (a *allocatedDevices) add(claim *resourceapi.ResourceClaim)    { a.apply(claim, true) }
func (a *allocatedDevices) remove(claim *resourceapi.ResourceClaim) { a.apply(claim, false) }

func (a *allocatedDevices) apply(claim *resourceapi.ResourceClaim, add bool) {
	if claim.Status.Allocation == nil {
		return
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			sid := structured.MakeSharedDeviceID(id, r.ShareID)
			var consumed structured.DeviceConsumedCapacity
			if r.ConsumedCapacity != nil {
				consumed = structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity)
			}
			if add {
				a.shared.Insert(sid)
				if r.ConsumedCapacity != nil {
					a.capacity.Insert(consumed)
				}
			} else {
				a.shared.Delete(sid)
				if r.ConsumedCapacity != nil {
					a.capacity.Remove(consumed)
				}
			}
			continue
		}
		if add {
			a.ids.Insert(id)
		} else {
			a.ids.Delete(id)
		}
	}
}
