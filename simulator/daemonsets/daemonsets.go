// Package daemonsets says which DaemonSet pods a node will run, as the
// DaemonSet controller decides it (upstream's NodeShouldRunDaemonPod:
// node name, required node affinity, taints and tolerations), so that a
// new node of a group is planned with the room its DaemonSet pods take,
// as the Cluster Autoscaler plans it.
package daemonsets

import (
	"crypto/sha256"
	"encoding/hex"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1 defaulting, as the API server runs it
	"k8s.io/kubernetes/pkg/controller/daemon"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"
	"k8s.io/utils/ptr"
)

// PodsFor returns the pods the DaemonSets would create for node, as the
// controller creates them: the template, the DaemonSet's tolerations, a
// required node affinity to this node, and a controller reference. They
// are not yet placed (spec.nodeName is empty).
func PodsFor(logger klog.Logger, node *v1.Node, sets []*appsv1.DaemonSet) []*v1.Pod {
	var out []*v1.Pod
	for _, ds := range sets {
		if shouldRun, _ := daemon.NodeShouldRunDaemonPod(logger, node, ds); !shouldRun {
			continue
		}
		pod := daemon.NewPod(ds, "")
		pod.Spec = *pod.Spec.DeepCopy()
		pod.Labels = copyMap(pod.Labels)
		pod.Annotations = copyMap(pod.Annotations)
		pod.Spec.Affinity = daemonutil.ReplaceDaemonSetPodNodeNameNodeAffinity(pod.Spec.Affinity, node.Name)
		pod.Name = ds.Name + "-" + suffix(ds.Namespace+"/"+ds.Name+"/"+node.Name)
		pod.UID = types.UID("daemonset-" + suffix(string(ds.UID)+"/"+ds.Namespace+"/"+ds.Name+"/"+node.Name))
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		pod.CreationTimestamp = ds.CreationTimestamp
		// Pod creation defaults what the template leaves out, requests
		// from limits among them: the pod takes what it will take.
		legacyscheme.Scheme.Default(pod)
		out = append(out, pod)
	}
	return out
}

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(pod *v1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	return ref != nil && ref.Kind == "DaemonSet"
}

func suffix(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])[:10]
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
