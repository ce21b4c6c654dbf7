package core

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
)

// EventInvalidNodeGroup is the reason of the Warning event on an object
// that would be a node group but is misconfigured (a bad annotation).
const EventInvalidNodeGroup = "InvalidNodeGroupConfig"

// groupErrorSource is a provider that can say which of its objects are
// not node groups this loop and why (the clusterapi provider does). It is
// optional: providers without such objects need not implement it.
type groupErrorSource interface {
	// GroupErrors maps an object ID to why it is not a node group.
	GroupErrors() map[string]error
	// GroupErrorObject is the object an ID names, for its events.
	GroupErrorObject(id string) *v1.ObjectReference
}

// reportGroupErrors makes each misconfigured group an event on its own
// object (once per distinct message, not every loop) and a log line; the
// status ConfigMap lists them from res.GroupErrors. The other groups are
// planned as usual.
func (a *Autoscaler) reportGroupErrors(ctx context.Context, res *LoopResult) {
	p := a.cfg.Provider
	if w, ok := p.(interface{ Unwrap() cloudprovider.Provider }); ok {
		p = w.Unwrap()
	}
	src, ok := p.(groupErrorSource)
	if !ok {
		return
	}
	errs := src.GroupErrors()
	reported := make(map[string]string, len(errs))
	for id, err := range errs {
		msg := err.Error()
		reported[id] = msg
		if res.GroupErrors == nil {
			res.GroupErrors = map[string]string{}
		}
		res.GroupErrors[id] = msg
		if a.groupErrorsReported[id] == msg {
			continue
		}
		metrics.RegisterError(metrics.ErrorConfiguration)
		klog.FromContext(ctx).Error(err, "Not a node group", "object", id)
		if ref := src.GroupErrorObject(id); ref != nil && a.cfg.Recorder != nil {
			a.cfg.Recorder.Eventf(ref, v1.EventTypeWarning, EventInvalidNodeGroup, "not a node group: %s", truncate(msg, 1000))
		}
	}
	a.groupErrorsReported = reported
}
