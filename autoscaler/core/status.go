package core

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/simulator/provreq"
)

// The status ConfigMap as the Cluster Autoscaler writes it: key "status"
// holds CA's ClusterAutoscalerStatus (its current schema, field for field,
// so tools that parse CA's status parse draxr's), and the annotation
// LastUpdatedAnnotation says when. draxr's own detail (why pods did not
// trigger a scale-up, unremovable nodes, misconfigured groups, planned
// devices) goes under the separate key "draxr", which CA's readers never
// look at.
const (
	StatusKey             = "status"
	DraxrStatusKey        = "draxr"
	LastUpdatedAnnotation = "cluster-autoscaler.kubernetes.io/last-updated"
	// LastUpdatedFormat is CA's format of the annotation and of "time".
	LastUpdatedFormat = "2006-01-02 15:04:05.999999999 -0700 MST"
	// DefaultStatusConfigMapName is CA's --status-config-map-name default.
	DefaultStatusConfigMapName = "cluster-autoscaler-status"
)

// CA's condition statuses.
const (
	StatusRunning           = "Running"
	StatusInitializing      = "Initializing"
	StatusHealthy           = "Healthy"
	StatusUnhealthy         = "Unhealthy"
	StatusInProgress        = "InProgress"
	StatusNoActivity        = "NoActivity"
	StatusBackoff           = "Backoff"
	StatusCandidatesPresent = "CandidatesPresent"
	StatusNoCandidates      = "NoCandidates"
)

// ClusterAutoscalerStatus is CA's status document (clusterstate/api).
type ClusterAutoscalerStatus struct {
	Time             string            `json:"time,omitempty"`
	AutoscalerStatus string            `json:"autoscalerStatus,omitempty"`
	Message          string            `json:"message,omitempty"`
	ClusterWide      ClusterWideStatus `json:"clusterWide,omitempty"`
	NodeGroups       []NodeGroupStatus `json:"nodeGroups,omitempty"`
}

// ClusterWideStatus is CA's cluster-wide conditions.
type ClusterWideStatus struct {
	Health    ClusterHealthCondition  `json:"health,omitempty"`
	ScaleUp   ClusterScaleUpCondition `json:"scaleUp,omitempty"`
	ScaleDown ScaleDownCondition      `json:"scaleDown,omitempty"`
}

// NodeGroupStatus is CA's per-group conditions.
type NodeGroupStatus struct {
	Name      string                    `json:"name,omitempty"`
	Health    NodeGroupHealthCondition  `json:"health,omitempty"`
	ScaleUp   NodeGroupScaleUpCondition `json:"scaleUp,omitempty"`
	ScaleDown ScaleDownCondition        `json:"scaleDown,omitempty"`
}

// ClusterHealthCondition is CA's cluster health.
type ClusterHealthCondition struct {
	Status             string      `json:"status,omitempty"`
	NodeCounts         NodeCount   `json:"nodeCounts,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeGroupHealthCondition is CA's node group health.
type NodeGroupHealthCondition struct {
	Status              string      `json:"status,omitempty"`
	NodeCounts          NodeCount   `json:"nodeCounts,omitempty"`
	CloudProviderTarget int         `json:"cloudProviderTarget"`
	MinSize             int         `json:"minSize"`
	MaxSize             int         `json:"maxSize"`
	LastProbeTime       metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime  metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ClusterScaleUpCondition is CA's cluster-wide scale-up state.
type ClusterScaleUpCondition struct {
	Status             string      `json:"status,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeGroupScaleUpCondition is CA's per-group scale-up state.
type NodeGroupScaleUpCondition struct {
	Status             string      `json:"status,omitempty"`
	BackoffInfo        BackoffInfo `json:"backoffInfo,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// BackoffInfo is why a group is backed off.
type BackoffInfo struct {
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// ScaleDownCondition is CA's scale-down state.
type ScaleDownCondition struct {
	Status             string      `json:"status,omitempty"`
	Candidates         int         `json:"candidates,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeCount is CA's node counts.
type NodeCount struct {
	Registered       RegisteredNodeCount `json:"registered,omitempty"`
	LongUnregistered int                 `json:"longUnregistered"`
	Unregistered     int                 `json:"unregistered"`
}

// RegisteredNodeCount counts registered nodes.
type RegisteredNodeCount struct {
	Total        int                        `json:"total"`
	Ready        int                        `json:"ready"`
	NotStarted   int                        `json:"notStarted"`
	BeingDeleted int                        `json:"beingDeleted,omitempty"`
	Unready      RegisteredUnreadyNodeCount `json:"unready,omitempty"`
}

// RegisteredUnreadyNodeCount counts registered, unready nodes.
type RegisteredUnreadyNodeCount struct {
	Total           int `json:"total"`
	ResourceUnready int `json:"resourceUnready"`
}

// DraxrStatus is draxr's detail, under the key "draxr".
type DraxrStatus struct {
	Time string `json:"time"`
	// LastError is the last loop's error, if any.
	LastError         string `json:"lastError,omitempty"`
	UnschedulablePods int    `json:"unschedulablePods"`
	// ScaleUp is the scale-up the last loop executed.
	ScaleUp *DraxrScaleUp `json:"scaleUp,omitempty"`
	// NoScaleUp are the pending pods no scale-up helps, with the
	// planner's reason.
	NoScaleUp []DraxrNoScaleUp `json:"noScaleUp,omitempty"`
	// NodeGroups are the groups with what CA's schema has no room for.
	NodeGroups []DraxrNodeGroup `json:"nodeGroups,omitempty"`
	// InvalidNodeGroups are objects that would be node groups but are
	// misconfigured.
	InvalidNodeGroups []DraxrInvalidNodeGroup `json:"invalidNodeGroups,omitempty"`
	UnneededNodes     []string                `json:"unneededNodes,omitempty"`
	RemovedNodes      []string                `json:"removedNodes,omitempty"`
	BeingDeleted      []string                `json:"beingDeleted,omitempty"`
	// UnremovableNodes are scale-down candidates the drain rules keep,
	// with CA's reason.
	UnremovableNodes []DraxrUnremovableNode `json:"unremovableNodes,omitempty"`
	// DryRun marks a dry run's status: the scale-up and removals are what
	// it would have done, WouldCall the provider calls it did not make.
	DryRun    bool     `json:"dryRun,omitempty"`
	WouldCall []string `json:"wouldCall,omitempty"`
	// ProvisioningRequests are the requests served (at most
	// maxStatusRequests, oldest first): each one's condition, and the
	// atomic scale-up this loop asked for it.
	ProvisioningRequests []provreq.Report `json:"provisioningRequests,omitempty"`
}

// maxStatusRequests bounds the requests listed in the status ConfigMap.
const maxStatusRequests = 100

// DraxrScaleUp is an executed scale-up.
type DraxrScaleUp struct {
	NodeGroup string `json:"nodeGroup"`
	NewNodes  int    `json:"newNodes"`
	Pods      int    `json:"pods"`
	// PlannedDevices are the DRA devices the new nodes were planned to
	// give the pods, per DeviceClass.
	PlannedDevices map[string]int `json:"plannedDevices,omitempty"`
}

// DraxrNoScaleUp is a pod no scale-up helps.
type DraxrNoScaleUp struct {
	Pod    string `json:"pod"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// DraxrNodeGroup is a group's state beyond CA's schema.
type DraxrNodeGroup struct {
	Name     string `json:"name"`
	Ready    int    `json:"ready"`
	Upcoming int    `json:"upcoming"`
	// NotForScaleUp is why the group may not grow, "" when it may.
	NotForScaleUp string `json:"notForScaleUp,omitempty"`
}

// DraxrInvalidNodeGroup is a misconfigured group.
type DraxrInvalidNodeGroup struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// DraxrUnremovableNode is a kept scale-down candidate.
type DraxrUnremovableNode struct {
	Node    string `json:"node"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// conditionTimes keeps each condition's status and since when it holds,
// so lastTransitionTime survives loops that do not change it.
type conditionTimes map[string]struct {
	status string
	since  time.Time
}

// transition returns since when the condition keyed key has status.
func (c conditionTimes) transition(key, status string, now time.Time) metav1.Time {
	prev, ok := c[key]
	if !ok || prev.status != status {
		prev.status, prev.since = status, now
		c[key] = prev
	}
	return metav1.NewTime(prev.since)
}

// writeStatus records the loop's outcome in the status ConfigMap.
func (l *loop) writeStatus(ctx context.Context, loopErr error) {
	if l.cfg.StatusName == "" {
		return
	}
	now := l.cfg.Now()
	status := l.caStatus(l.st, l.res, now)
	draxr := l.draxrStatus(l.st, l.res, l.requests, loopErr, now)
	if err := l.putStatus(ctx, status, draxr, now); err != nil {
		klog.FromContext(ctx).Error(err, "Writing status ConfigMap", "configmap", klog.KRef(l.cfg.StatusNamespace, l.cfg.StatusName))
	}
}

// WriteInitializingStatus writes CA's Initializing status, as CA does
// before its first loop.
func (a *Autoscaler) WriteInitializingStatus(ctx context.Context) error {
	if a.cfg.StatusName == "" {
		return nil
	}
	now := a.cfg.Now()
	return a.putStatus(ctx, &ClusterAutoscalerStatus{Time: now.Format(LastUpdatedFormat), AutoscalerStatus: StatusInitializing,
		Message: "draxr-autoscaler is starting: waiting for its caches and the first loop"}, nil, now)
}

// DeleteStatus deletes the status ConfigMap, as CA does on exit.
func (a *Autoscaler) DeleteStatus(ctx context.Context) error {
	if a.cfg.StatusName == "" {
		return nil
	}
	err := a.cfg.Client.CoreV1().ConfigMaps(a.cfg.StatusNamespace).Delete(ctx, a.cfg.StatusName, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete status ConfigMap %s/%s: %w", a.cfg.StatusNamespace, a.cfg.StatusName, err)
	}
	return nil
}

func (a *Autoscaler) caStatus(st *clusterstate.State, res *LoopResult, now time.Time) *ClusterAutoscalerStatus {
	probe := metav1.NewTime(now)
	tr := a.conditions.transition
	beingDeleted := map[string]int{}
	a.sd.mu.Lock()
	for node := range a.sd.deleting {
		beingDeleted[st.GroupOf[node]]++
	}
	a.sd.mu.Unlock()
	total := 0
	for _, n := range beingDeleted {
		total += n
	}
	unneeded := map[string]int{}
	for _, n := range res.Unneeded {
		unneeded[st.GroupOf[n]]++
	}

	s := &ClusterAutoscalerStatus{Time: now.Format(LastUpdatedFormat), AutoscalerStatus: StatusRunning}
	health := StatusHealthy
	if !st.Healthy {
		health = StatusUnhealthy
	}
	s.ClusterWide.Health = ClusterHealthCondition{Status: health, NodeCounts: nodeCount(st.Readiness, total),
		LastProbeTime: probe, LastTransitionTime: tr("health", health, now)}
	scaleUp := StatusNoActivity
	groups := a.cfg.Provider.NodeGroups()
	for _, g := range groups {
		if a.clusterState.ScaleUpInProgress(g.Id()) {
			scaleUp = StatusInProgress
		}
	}
	s.ClusterWide.ScaleUp = ClusterScaleUpCondition{Status: scaleUp, LastProbeTime: probe, LastTransitionTime: tr("scaleUp", scaleUp, now)}
	s.ClusterWide.ScaleDown = scaleDownCondition(len(res.Unneeded), probe, tr, "scaleDown", now)

	for _, g := range groups {
		id := g.Id()
		target, _ := g.TargetSize()
		health := StatusHealthy
		if healthy, ok := st.GroupHealthy[id]; ok && !healthy {
			health = StatusUnhealthy
		}
		ng := NodeGroupStatus{Name: id}
		ng.Health = NodeGroupHealthCondition{Status: health, NodeCounts: nodeCount(st.GroupReadiness[id], beingDeleted[id]),
			CloudProviderTarget: target, MinSize: g.MinSize(), MaxSize: g.MaxSize(),
			LastProbeTime: probe, LastTransitionTime: tr(id+"/health", health, now)}
		// CA's order: backed off, then unhealthy, then in progress. Read
		// now: this loop may have backed it off.
		up := NodeGroupScaleUpCondition{Status: StatusNoActivity, LastProbeTime: probe}
		switch bs := a.clusterState.BackoffStatus(id, now); {
		case bs.BackedOff:
			up.Status = StatusBackoff
			up.BackoffInfo = BackoffInfo{ErrorCode: bs.Reason.Code, ErrorMessage: truncate(bs.Reason.Message, 500)}
		case health == StatusUnhealthy:
			up.Status = StatusUnhealthy
		case a.clusterState.ScaleUpInProgress(id):
			up.Status = StatusInProgress
		}
		up.LastTransitionTime = tr(id+"/scaleUp", up.Status, now)
		ng.ScaleUp = up
		ng.ScaleDown = scaleDownCondition(unneeded[id], probe, tr, id+"/scaleDown", now)
		s.NodeGroups = append(s.NodeGroups, ng)
	}
	// Groups gone from the provider do not keep their times.
	live := map[string]bool{"health": true, "scaleUp": true, "scaleDown": true}
	for _, g := range s.NodeGroups {
		for _, c := range []string{"/health", "/scaleUp", "/scaleDown"} {
			live[g.Name+c] = true
		}
	}
	for k := range a.conditions {
		if !live[k] {
			delete(a.conditions, k)
		}
	}
	return s
}

func scaleDownCondition(candidates int, probe metav1.Time, tr func(string, string, time.Time) metav1.Time, key string, now time.Time) ScaleDownCondition {
	status := StatusNoCandidates
	if candidates > 0 {
		status = StatusCandidatesPresent
	}
	return ScaleDownCondition{Status: status, Candidates: candidates, LastProbeTime: probe, LastTransitionTime: tr(key, status, now)}
}

func nodeCount(r clusterstate.Readiness, beingDeleted int) NodeCount {
	return NodeCount{
		Registered: RegisteredNodeCount{Total: r.Ready + r.Unready + r.NotStarted, Ready: r.Ready, NotStarted: r.NotStarted,
			BeingDeleted: beingDeleted, Unready: RegisteredUnreadyNodeCount{Total: r.Unready, ResourceUnready: r.ResourceUnready}},
		LongUnregistered: r.LongUnregistered,
		Unregistered:     r.Unregistered,
	}
}

func (a *Autoscaler) draxrStatus(st *clusterstate.State, res *LoopResult, requests *provisioning.Loop, loopErr error, now time.Time) *DraxrStatus {
	d := &DraxrStatus{Time: now.Format(LastUpdatedFormat), UnschedulablePods: res.Unschedulable, RemovedNodes: res.Removed,
		DryRun: res.DryRun, WouldCall: res.WouldCall}
	if loopErr != nil {
		d.LastError = truncate(loopErr.Error(), 2000)
	}
	if su := res.ScaleUp; su != nil {
		d.ScaleUp = &DraxrScaleUp{NodeGroup: su.NodeGroup, NewNodes: su.NewNodes, Pods: len(su.Pods), PlannedDevices: plannedDevices(su)}
	}
	for _, n := range res.NoScaleUp {
		d.NoScaleUp = append(d.NoScaleUp, DraxrNoScaleUp{Pod: n.Pod.String(), Code: string(n.Code), Reason: n.Reason})
	}
	if requests != nil {
		decided := map[string]provreq.Report{}
		for _, r := range res.ProvisioningRequests {
			decided[r.Namespace+"/"+r.Name] = r
		}
		for _, pr := range requests.Served {
			if len(d.ProvisioningRequests) == maxStatusRequests {
				break
			}
			r := provreq.ReportOf(pr, nil)
			if dr, ok := decided[provreq.Key(pr)]; ok {
				r = dr
			}
			d.ProvisioningRequests = append(d.ProvisioningRequests, r)
		}
	}
	for _, g := range a.cfg.Provider.NodeGroups() {
		id := g.Id()
		d.NodeGroups = append(d.NodeGroups, DraxrNodeGroup{Name: id, Ready: st.GroupReadiness[id].Ready,
			Upcoming: st.Upcoming[id], NotForScaleUp: st.NotForScaleUp[id]})
	}
	ids := make([]string, 0, len(res.GroupErrors))
	for id := range res.GroupErrors {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d.InvalidNodeGroups = append(d.InvalidNodeGroups, DraxrInvalidNodeGroup{Name: id, Reason: truncate(res.GroupErrors[id], 500)})
	}
	d.UnneededNodes = append([]string(nil), res.Unneeded...)
	sort.Strings(d.UnneededNodes)
	a.sd.mu.Lock()
	for n := range a.sd.deleting {
		d.BeingDeleted = append(d.BeingDeleted, n)
	}
	for _, r := range a.sd.unremovable {
		d.UnremovableNodes = append(d.UnremovableNodes, DraxrUnremovableNode{Node: r.Node, Reason: string(r.Code), Message: r.Reason})
	}
	a.sd.mu.Unlock()
	sort.Strings(d.BeingDeleted)
	return d
}

// putStatus writes the ConfigMap (draxr nil leaves out its key), keeping
// its other data and annotations, as CA updates it in place.
func (a *Autoscaler) putStatus(ctx context.Context, status *ClusterAutoscalerStatus, draxr *DraxrStatus, now time.Time) error {
	body, err := yaml.Marshal(status)
	if err != nil {
		return fmt.Errorf("marshal status: %w", err)
	}
	data := map[string]string{StatusKey: string(body)}
	if draxr != nil {
		extra, err := yaml.Marshal(draxr)
		if err != nil {
			return fmt.Errorf("marshal draxr status: %w", err)
		}
		data[DraxrStatusKey] = string(extra)
	}
	stamp := now.Format(LastUpdatedFormat)
	c := a.cfg.Client.CoreV1().ConfigMaps(a.cfg.StatusNamespace)
	cm, err := c.Get(ctx, a.cfg.StatusName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.StatusName, Namespace: a.cfg.StatusNamespace,
			Annotations: map[string]string{LastUpdatedAnnotation: stamp}}, Data: data}
		_, err = c.Create(ctx, cm, metav1.CreateOptions{})
		return err
	case err != nil:
		return err
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[LastUpdatedAnnotation] = stamp
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	delete(cm.Data, DraxrStatusKey)
	for k, v := range data {
		cm.Data[k] = v
	}
	_, err = c.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
