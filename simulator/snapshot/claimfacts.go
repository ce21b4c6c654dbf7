package snapshot

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

// claimFacts are what the snapshot derives from a claim when it is set:
// its results' device IDs (making one interns three strings, a tenth of
// a quiet loop's snapshot build at 20,000 claims) and the pod owning it
// as its extended-resource claim.
type claimFacts struct {
	ids   []structured.DeviceID
	owner types.UID
	xr    bool
}

func factsOf(c *resourceapi.ResourceClaim) claimFacts {
	f := claimFacts{ids: deviceIDs(c)}
	f.owner, f.xr = extendedResourceClaimOwner(c)
	return f
}

// claimEntry is one claim object's facts, kept across builds while the
// object stays the same.
type claimEntry struct {
	facts claimFacts // in the entry: one allocation a claim, not two
	// uid and resourceVersion are the object's when its facts were read:
	// the API server changes the version with any change, so an object
	// edited in place under a new version is read again.
	uid             types.UID
	resourceVersion string
	used            int // the last build that used it
}

// claimFactsFor returns c's facts, from the last builds when the same
// object (same pointer, UID and resourceVersion) was set then. An
// informer replaces an object that changes, never edits it; a claim
// without a UID or resourceVersion is never kept.
func (c *PodInfos) claimFactsFor(claim *resourceapi.ResourceClaim) *claimFacts {
	if claim.UID == "" || claim.ResourceVersion == "" {
		f := factsOf(claim)
		return &f
	}
	e, ok := c.claims[claim]
	if !ok || e.uid != claim.UID || e.resourceVersion != claim.ResourceVersion {
		e = &claimEntry{facts: factsOf(claim), uid: claim.UID, resourceVersion: claim.ResourceVersion}
		c.claims[claim] = e
	}
	e.used = c.claimBuild
	return &e.facts
}

// startClaims begins a build's claims: entries the previous build did
// not use are dropped.
func (c *PodInfos) startClaims(n int) {
	c.claimBuild++
	if c.claims == nil {
		c.claims = make(map[*resourceapi.ResourceClaim]*claimEntry, n)
	}
	for key, e := range c.claims {
		if e.used < c.claimBuild-1 {
			delete(c.claims, key)
		}
	}
}

// SetResourceClaims sets each claim as SetResourceClaim does, with what
// infos kept of the same objects from the last build. infos may be nil.
func (s *Snapshot) SetResourceClaims(claims []*resourceapi.ResourceClaim, infos *PodInfos) {
	if infos == nil {
		for _, claim := range claims {
			s.SetResourceClaim(claim)
		}
		return
	}
	infos.startClaims(len(claims))
	for _, claim := range claims {
		s.setResourceClaim(claim, infos.claimFactsFor(claim))
	}
}
