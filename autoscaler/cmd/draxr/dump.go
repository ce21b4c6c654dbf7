package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/view"
)

func newDumpCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "dump --kubeconfig FILE",
		Short: "Write every kind draxr reads of a cluster as one YAML List, for draxr simulate -f",
		Long: `Write what draxr simulate --kubeconfig reads of the cluster (nodes, pods,
ResourceSlices, DeviceClasses, ResourceClaims and their templates,
DeviceTaintRules, DaemonSets, PodGroups, and where the API server serves
them Volcano's PodGroups, ProvisioningRequests, CapacityBuffers, the
PodTemplates they name and ResourceQuotas) as one YAML List on stdout:
draxr simulate -f plans it as it plans the cluster. A kind the API server
does not serve is skipped with a note on stderr. Nothing is written to the
cluster.`,
		Example: exampleText(g.asPlugin, `
# Dump a kubeconfig context's cluster, then plan it for its NodeGroups
draxr dump --context prod > cluster.yaml
draxr simulate -f cluster.yaml -f nodegroups.yaml`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, cfg, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.syncTimeout)
			defer cancel()
			if err := dumpCluster(ctx, client, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
				return fmt.Errorf("%s: %w", cfg.Host, err)
			}
			return nil
		},
	}
}

// dumpCluster reads the cluster as simulate --kubeconfig does (cfg nil:
// the kinds of client's clientset only) and writes it to w, with a note
// on stderr for each optional kind the API server does not serve.
func dumpCluster(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, w, stderr io.Writer) error {
	for _, gvr := range notServed(client.Discovery()) {
		fmt.Fprintf(stderr, "note: the API server does not serve %s: skipped\n", gvr.GroupResource())
	}
	objs, err := liveview.Read(ctx, client, cfg)
	if err != nil {
		return err
	}
	return writeList(w, objs)
}

// notServed are the kinds a plan reads where they are served (CRDs) that
// the API server does not serve.
func notServed(disco discovery.DiscoveryInterface) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, gvr := range []schema.GroupVersionResource{view.VolcanoPodGroupsResource(),
		prv1.SchemeGroupVersion.WithResource("provisioningrequests"), capacitybuffer.GroupVersionResource()} {
		if liveview.CheckServed(disco, gvr) != nil {
			out = append(out, gvr)
		}
	}
	return out
}

// writeList writes objs as one `kind: List` document, as kubectl get -o
// yaml does, each item with its apiVersion and kind.
func writeList(w io.Writer, objs *input.Objects) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := prv1.AddToScheme(scheme); err != nil {
		return err
	}
	var items []runtime.Object
	for _, o := range listed(objs) {
		if o.GetObjectKind().GroupVersionKind().Empty() {
			gvks, _, err := scheme.ObjectKinds(o)
			if err != nil {
				return err
			}
			o.GetObjectKind().SetGroupVersionKind(gvks[0])
		}
		items = append(items, o)
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// listed is every object read, in the order a person reads a dump: the
// nodes and their devices, the pods and what they ask, the batch kinds.
func listed(objs *input.Objects) []runtime.Object {
	var out []runtime.Object
	out = appendAll(out, objs.Nodes)
	out = appendAll(out, objs.ResourceSlices)
	out = appendAll(out, objs.DeviceClasses)
	out = appendAll(out, objs.DeviceTaintRules)
	out = appendAll(out, objs.DaemonSets)
	out = appendAll(out, mountingReadVolumes(objs.RunningPods))
	out = appendAll(out, mountingReadVolumes(objs.PendingPods))
	out = appendAll(out, objs.ResourceClaims)
	out = appendAll(out, objs.ResourceClaimTemplates)
	out = appendAll(out, objs.PodGroups)
	out = appendAll(out, objs.VolcanoPodGroups)
	out = appendAll(out, objs.ProvisioningRequests)
	out = appendAll(out, objs.PodTemplates)
	out = appendAll(out, objs.ResourceQuotas)
	return appendAll(out, objs.CapacityBuffers)
}

func appendAll[T runtime.Object](out []runtime.Object, list []T) []runtime.Object {
	for _, o := range list {
		out = append(out, o)
	}
	return out
}

// mountingReadVolumes drops from each pod's containers the mounts of the
// volumes the read left out (service-account tokens, ConfigMaps,
// Secrets: only the kubelet reads them), so that the pods are valid as
// written; no plan reads either.
func mountingReadVolumes(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, pod := range pods {
		kept := make(map[string]bool, len(pod.Spec.Volumes))
		for _, v := range pod.Spec.Volumes {
			kept[v.Name] = true
		}
		pod = pod.DeepCopy()
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for j := range cs {
				cs[j].VolumeMounts = slices.DeleteFunc(cs[j].VolumeMounts, func(m v1.VolumeMount) bool { return !kept[m.Name] })
			}
		}
		out[i] = pod
	}
	return out
}
