package core

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/simulator/expander"
)

// CA's priority expander ConfigMap: its name (in --namespace), its key,
// and the Warning event reasons recorded on it.
const (
	PriorityConfigMapName             = "cluster-autoscaler-priority-expander"
	PriorityConfigMapKey              = "priorities"
	EventPriorityConfigMapInvalid     = "PriorityConfigMapInvalid"
	EventPriorityConfigMapNotMatched  = "PriorityConfigMapNotMatchedGroup"
	EventPriorityConfigMapNoneMatched = "PriorityConfigMapNoGroupMatched"
)

// PriorityConfigMap is the priority expander reading CA's ConfigMap at
// every choice, so an edit applies at the next scale-up, as in CA:
//   - ConfigMap missing: no group is chosen (logged; there is no object
//     to record an event on);
//   - no priorities key, or a value that does not parse: no group is
//     chosen, PriorityConfigMapInvalid;
//   - a group no regexp matches is left out, PriorityConfigMapNotMatchedGroup;
//   - no group matches: all stay, PriorityConfigMapNoGroupMatched.
type PriorityConfigMap struct {
	Lister   corelisters.ConfigMapNamespaceLister
	Recorder record.EventRecorder
	Logger   klog.Logger
}

// Filter keeps the options of the highest priority (expander.NewWithPriority).
func (p *PriorityConfigMap) Filter(options []expander.Option) []expander.Option {
	cm, err := p.Lister.Get(PriorityConfigMapName)
	if err != nil {
		p.Logger.Error(err, "Priority expander: no node group chosen", "configMap", PriorityConfigMapName)
		return nil
	}
	raw, ok := cm.Data[PriorityConfigMapKey]
	if !ok {
		p.warn(cm, EventPriorityConfigMapInvalid, fmt.Sprintf("priority expander: ConfigMap %s/%s has no %q key; no node group is chosen until it has one",
			cm.Namespace, cm.Name, PriorityConfigMapKey))
		return nil
	}
	prios, err := expander.ParseConfigMapPriorities(raw)
	if err != nil {
		p.warn(cm, EventPriorityConfigMapInvalid, fmt.Sprintf("priority expander: ConfigMap %s/%s key %q: %v; no node group is chosen until it is fixed",
			cm.Namespace, cm.Name, PriorityConfigMapKey, err))
		return nil
	}
	var best []expander.Option
	top := 0
	for _, o := range options {
		pr, ok := prios.Of(o.Group)
		switch {
		case !ok:
			p.warn(cm, EventPriorityConfigMapNotMatched, fmt.Sprintf("priority expander: node group %s matches no regexp of ConfigMap %s/%s; it is not chosen while another group matches",
				o.Group, cm.Namespace, cm.Name))
		case len(best) == 0 || pr > top:
			best, top = []expander.Option{o}, pr
		case pr == top:
			best = append(best, o)
		}
	}
	if len(best) == 0 {
		p.warn(cm, EventPriorityConfigMapNoneMatched, fmt.Sprintf("priority expander: no node group that could help matches ConfigMap %s/%s; all are considered",
			cm.Namespace, cm.Name))
		return options
	}
	return best
}

func (p *PriorityConfigMap) warn(cm *v1.ConfigMap, reason, msg string) {
	if p.Recorder != nil {
		p.Recorder.Event(cm, v1.EventTypeWarning, reason, msg)
	}
	p.Logger.Info(msg, "reason", reason)
}
