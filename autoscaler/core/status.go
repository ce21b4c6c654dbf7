package core

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/clusterstate"
)

// writeStatus records the loop's outcome in a ConfigMap, as the Cluster
// Autoscaler's status ConfigMap does, for people and scripts.
func (a *Autoscaler) writeStatus(ctx context.Context, st *clusterstate.State, res *LoopResult, loopErr error) {
	if a.cfg.StatusName == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "time: %s\n", a.cfg.Now().UTC().Format("2006-01-02T15:04:05Z"))
	if loopErr != nil {
		fmt.Fprintf(&b, "lastError: %q\n", loopErr.Error())
	}
	health, r := "Healthy", st.Readiness
	if !st.Healthy {
		health = "Unhealthy"
	}
	fmt.Fprintf(&b, "clusterWide:\n  health:\n    status: %s\n    nodeCounts: {ready: %d, unready: %d, notStarted: %d, unregistered: %d, longUnregistered: %d}\n",
		health, r.Ready, r.Unready, r.NotStarted, r.Unregistered, r.LongUnregistered)
	fmt.Fprintf(&b, "unschedulablePods: %d\nnodeGroups:\n", res.Unschedulable)
	ready := map[string]int{}
	for node, g := range st.GroupOf {
		if st.Ready[node] {
			ready[g]++
		}
	}
	for _, g := range a.cfg.Provider.NodeGroups() {
		target, _ := g.TargetSize()
		fmt.Fprintf(&b, "- name: %s\n  minSize: %d\n  maxSize: %d\n  targetSize: %d\n  ready: %d\n  upcoming: %d\n",
			g.Id(), g.MinSize(), g.MaxSize(), target, ready[g.Id()], st.Upcoming[g.Id()])
		// CA's scaleUp status; Backoff carries the error (message at most
		// 500 characters). Read now: this loop may have backed it off.
		if bs := a.clusterState.BackoffStatus(g.Id(), a.cfg.Now()); bs.BackedOff {
			fmt.Fprintf(&b, "  scaleUp:\n    status: Backoff\n    backoffInfo: {errorCode: %q, errorMessage: %q}\n",
				bs.Reason.Code, truncate(bs.Reason.Message, 500))
		} else if why, out := st.NotForScaleUp[g.Id()]; out {
			fmt.Fprintf(&b, "  scaleUp:\n    status: Unhealthy\n    reason: %q\n", truncate(why, 500))
		}
	}
	writeGroupErrors(&b, res)
	if su := res.ScaleUp; su != nil {
		fmt.Fprintf(&b, "scaleUp:\n  nodeGroup: %s\n  newNodes: %d\n  pods: %d\n", su.NodeGroup, su.NewNodes, len(su.Pods))
	}
	unneeded := append([]string(nil), res.Unneeded...)
	sort.Strings(unneeded)
	fmt.Fprintf(&b, "unneededNodes: [%s]\nremovedNodes: [%s]\n", strings.Join(unneeded, ", "), strings.Join(res.Removed, ", "))
	if len(res.NoScaleUp) > 0 {
		fmt.Fprintf(&b, "noScaleUp:\n")
		for _, n := range res.NoScaleUp {
			fmt.Fprintf(&b, "- pod: %s\n  reason: %q\n", n.Pod, n.Reason)
		}
	}
	a.writeScaleDownStatus(&b)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.StatusName, Namespace: a.cfg.StatusNamespace},
		Data: map[string]string{"status": b.String()}}
	c := a.cfg.Client.CoreV1().ConfigMaps(a.cfg.StatusNamespace)
	_, err := c.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Writing status ConfigMap", "configmap", klog.KObj(cm))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
