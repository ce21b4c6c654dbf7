package snapshot

import (
	"maps"

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
	// shares counts the shares of each device allocated several times.
	shares map[structured.DeviceID]int
}

func newAllocatedDevices() allocatedDevices {
	return allocatedDevices{
		ids:      sets.New[structured.DeviceID](),
		shared:   sets.New[structured.SharedDeviceID](),
		capacity: structured.NewConsumedCapacityCollection(),
		shares:   map[structured.DeviceID]int{},
	}
}

func (a *allocatedDevices) clone() allocatedDevices {
	return allocatedDevices{ids: a.ids.Clone(), shared: a.shared.Clone(), capacity: a.capacity.Clone(), shares: maps.Clone(a.shares)}
}

// DeviceUsage is what allocated claims take of devices: the devices held
// whole, and of those allocated several times (KEP-5075) their shares and
// consumed capacity. Admin-access results take nothing. It is a view of
// the snapshot: read it before the snapshot changes.
type DeviceUsage struct{ a *allocatedDevices }

// DeviceUsage returns the snapshot's device usage.
func (s *Snapshot) DeviceUsage() DeviceUsage { return DeviceUsage{&s.allocated} }

// Whole reports whether a claim holds the device whole.
func (u DeviceUsage) Whole(id structured.DeviceID) bool { return u.a != nil && u.a.ids.Has(id) }

// Shares counts the device's shares.
func (u DeviceUsage) Shares(id structured.DeviceID) int {
	if u.a == nil {
		return 0
	}
	return u.a.shares[id]
}

// Consumed is the capacity the device's shares consume, by name.
func (u DeviceUsage) Consumed(id structured.DeviceID) structured.ConsumedCapacity {
	if u.a == nil {
		return nil
	}
	return u.a.capacity[id]
}

func (a *allocatedDevices) add(claim *resourceapi.ResourceClaim)    { a.apply(claim, nil, true) }
func (a *allocatedDevices) remove(claim *resourceapi.ResourceClaim) { a.apply(claim, nil, false) }

// deviceIDs are the device IDs of the claim's allocation results, by
// result index (nil without an allocation).
func deviceIDs(claim *resourceapi.ResourceClaim) []structured.DeviceID {
	if claim.Status.Allocation == nil {
		return nil
	}
	results := claim.Status.Allocation.Devices.Results
	ids := make([]structured.DeviceID, len(results))
	for i, r := range results {
		ids[i] = structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
	}
	return ids
}

// apply adds or removes the claim's devices; ids are its deviceIDs when
// known (nil: made here).
func (a *allocatedDevices) apply(claim *resourceapi.ResourceClaim, ids []structured.DeviceID, add bool) {
	if claim.Status.Allocation == nil {
		return
	}
	for i, r := range claim.Status.Allocation.Devices.Results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		var id structured.DeviceID
		if ids != nil {
			id = ids[i]
		} else {
			id = structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		}
		if r.ShareID != nil {
			sid := structured.MakeSharedDeviceID(id, r.ShareID)
			var consumed structured.DeviceConsumedCapacity
			if r.ConsumedCapacity != nil {
				consumed = structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity)
			}
			if add {
				a.shares[id]++
				a.shared.Insert(sid)
				if r.ConsumedCapacity != nil {
					a.capacity.Insert(consumed)
				}
			} else {
				if a.shares[id]--; a.shares[id] <= 0 {
					delete(a.shares, id)
				}
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

// Of is how much of a device claims take, the one definition utilization,
// capacity, waste, shared-pool reasons and metrics all read: 1 for a
// device held whole; for one allocated several times (KEP-5075), the
// largest fraction of a declared capacity its shares consume, or 1 when
// it declares none; 0 when free. shares counts its shares.
func (u DeviceUsage) Of(driver, pool string, d *resourceapi.Device) (use float64, shares int) {
	if u.a == nil {
		return 0, 0
	}
	id := structured.MakeDeviceID(driver, pool, d.Name)
	if u.Whole(id) {
		return 1, 0
	}
	shares = u.Shares(id)
	if shares == 0 {
		return 0, 0
	}
	return ShareOfCapacity(d, u.Consumed(id)), shares
}

// ShareOfCapacity is the largest fraction of the device's declared
// capacities that consumed takes, at most 1; 1 when the device declares
// none (any share holds it).
func ShareOfCapacity(d *resourceapi.Device, consumed structured.ConsumedCapacity) float64 {
	if len(d.Capacity) == 0 {
		return 1
	}
	var use float64
	for name, c := range d.Capacity {
		q := consumed[name]
		if q == nil || c.Value.IsZero() {
			continue
		}
		use = max(use, q.AsApproximateFloat64()/c.Value.AsApproximateFloat64())
	}
	return min(use, 1)
}
