package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/test/soak/checker"
)

// auditPolicy records who deleted or evicted pods and who created or
// deleted nodes: the facts the checker judges deletions by.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [delete, deletecollection]
  resources: [{group: "", resources: [pods, nodes]}]
- level: Metadata
  verbs: [create]
  resources: [{group: "", resources: [pods/eviction, nodes]}]
- level: None
`

// observer turns what informers and the audit log see into the
// checker's observations, in one channel.
type observer struct {
	out chan<- checker.Observation
}

func (o *observer) send(obs checker.Observation) {
	if obs.Time.IsZero() {
		obs.Time = time.Now()
	}
	o.out <- obs
}

func podKey(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key
	}
	p := obj.(*v1.Pod)
	return p.Namespace + "/" + p.Name
}

func nodeName(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key
	}
	return obj.(*v1.Node).Name
}

// start runs the informers until ctx ends and returns once they synced.
func (o *observer) start(ctx context.Context, client kubernetes.Interface) error {
	f := informers.NewSharedInformerFactory(client, 0)
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandlerFuncs
	}{
		{f.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.send(checker.Observation{Kind: checker.PodUpdate, Pod: obj.(*v1.Pod)}) },
			UpdateFunc: func(_, obj any) { o.send(checker.Observation{Kind: checker.PodUpdate, Pod: obj.(*v1.Pod)}) },
			DeleteFunc: func(obj any) { o.send(checker.Observation{Kind: checker.PodDelete, Name: podKey(obj)}) },
		}},
		{f.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.send(checker.Observation{Kind: checker.NodeUpdate, Node: obj.(*v1.Node)}) },
			UpdateFunc: func(_, obj any) { o.send(checker.Observation{Kind: checker.NodeUpdate, Node: obj.(*v1.Node)}) },
			DeleteFunc: func(obj any) { o.send(checker.Observation{Kind: checker.NodeDelete, Name: nodeName(obj)}) },
		}},
		{f.Resource().V1().ResourceSlices().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if s := obj.(*resourceapi.ResourceSlice); s.Spec.NodeName != nil {
					o.send(checker.Observation{Kind: checker.SlicesPublished, Name: *s.Spec.NodeName, Count: 1})
				}
			},
		}},
		{f.Policy().V1().PodDisruptionBudgets().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				o.send(checker.Observation{Kind: checker.PDBUpdate, PDB: obj.(*policyv1.PodDisruptionBudget)})
			},
			UpdateFunc: func(_, obj any) {
				o.send(checker.Observation{Kind: checker.PDBUpdate, PDB: obj.(*policyv1.PodDisruptionBudget)})
			},
		}},
		{f.Core().V1().Events().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.event(obj.(*v1.Event)) },
			UpdateFunc: func(_, obj any) { o.event(obj.(*v1.Event)) },
		}},
		{f.Core().V1().ConfigMaps().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.status(obj.(*v1.ConfigMap)) },
			UpdateFunc: func(_, obj any) { o.status(obj.(*v1.ConfigMap)) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return &syncError{typ: typ.String()}
		}
	}
	return nil
}

type syncError struct{ typ string }

func (e *syncError) Error() string { return "informer for " + e.typ + " did not sync" }

func (o *observer) event(e *v1.Event) {
	if e.Reason != core.EventTriggeredScaleUp || e.InvolvedObject.Kind != "Pod" {
		return
	}
	// An informer's relist replays old events; only fresh ones count.
	if time.Since(e.LastTimestamp.Time) > 5*time.Second && time.Since(e.EventTime.Time) > 5*time.Second {
		return
	}
	o.send(checker.Observation{Kind: checker.ScaleUpEvent, Name: e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name})
}

func (o *observer) status(cm *v1.ConfigMap) {
	if cm.Namespace != metav1.NamespaceSystem || cm.Name != core.DefaultStatusConfigMapName {
		return
	}
	o.send(checker.Observation{Kind: checker.LeaderActivity, Text: cm.Annotations[core.LastUpdatedAnnotation]})
}

// tailAudit follows the API server's audit log (restarts append to it)
// until ctx ends.
func (o *observer) tailAudit(ctx context.Context, path string) {
	var offset int64
	var partial []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			continue
		}
		data, _ := io.ReadAll(f)
		f.Close()
		offset += int64(len(data))
		data = append(partial, data...)
		last := bytes.LastIndexByte(data, '\n')
		if last < 0 {
			partial = data
			continue
		}
		partial = append([]byte(nil), data[last+1:]...)
		sc := bufio.NewScanner(bytes.NewReader(data[:last+1]))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil {
				continue
			}
			c := &checker.Call{User: ev.User.Username, Verb: ev.Verb, Resource: ev.ObjectRef.Resource,
				Subresource: ev.ObjectRef.Subresource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
			if ev.ResponseStatus != nil {
				c.Code = int(ev.ResponseStatus.Code)
			}
			o.send(checker.Observation{Kind: checker.APICall, Call: c})
		}
	}
}

// leaseHolder reads the autoscaler's lease holder ("" when none).
func leaseHolder(ctx context.Context, client kubernetes.Interface) string {
	var l *coordinationv1.Lease
	l, err := client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "draxr-autoscaler", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
