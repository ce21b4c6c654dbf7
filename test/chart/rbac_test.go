package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A use is one API call draxr-autoscaler makes, and so one grant the
// chart must make: the verb on group/resource, in the scope where the
// chart grants it ("cluster": the ClusterRole; "release": the Role in the
// release's namespace; "templates": the Roles of
// autoscaler.clusterAPI.configMapNamespaces), justified by call in file.
type use struct {
	side                   string // workload (every provider), apinodes (local and kwok), local, kwok, clusterapi, externalgrpc
	scope                  string
	group, resource, verbs string // verbs space-separated
	file, call             string
}

// autoscalerUses is every call behind the autoscaler's RBAC. Informers
// (a Lister or Informer) need list and watch.
func autoscalerUses() []use {
	const (
		informers = "autoscaler/liveview/informers.go"
		taint     = "autoscaler/core/scaledown_taint.go"
		drain     = "autoscaler/core/scaledown_drain.go"
		status    = "autoscaler/core/status.go"
		run       = "autoscaler/app/run.go"
		local     = "cloudprovider/local/local.go"
		lifecycle = "cloudprovider/local/lifecycle.go"
		capi      = "cloudprovider/clusterapi/clusterapi.go"
		capiWatch = "cloudprovider/clusterapi/watched.go"
		egrpc     = "cloudprovider/externalgrpc/externalgrpc.go"
		egrpcTmpl = "cloudprovider/externalgrpc/templates.go"
		apinodes  = "cloudprovider/apinodes/apinodes.go"
		kwok      = "cloudprovider/kwok/kwok.go"
		kwokTmpl  = "cloudprovider/kwok/templates.go"
		provReq   = "autoscaler/provisioning/processor.go"
	)
	return []use{
		{"workload", "cluster", "", "nodes", "list watch", informers, "f.Core().V1().Nodes().Lister()"},
		{"workload", "cluster", "", "nodes", "get", taint, ".CoreV1().Nodes().Get(ctx, nodeName"},
		{"workload", "cluster", "", "nodes", "update", taint, ".CoreV1().Nodes().Update(ctx, node"},
		// Without the autoscaler's node informer (the CLI) the clusterapi
		// and externalgrpc providers list nodes.
		{"workload", "cluster", "", "nodes", "list", apinodes, "c.CoreV1().Nodes().List(ctx"},
		{"workload", "cluster", "", "pods", "list watch", informers, "f.Core().V1().Pods().Lister()"},
		// The loop trigger's handlers on the same informers (no grant of
		// their own, but every call is listed).
		{"workload", "cluster", "", "pods", "list watch", run, "factory.Core().V1().Pods().Informer()"},
		{"workload", "cluster", "scheduling.k8s.io", "podgroups", "list watch", run, "factory.Scheduling().V1beta1().PodGroups().Informer()"},
		{"workload", "cluster", "", "pods", "get", drain, ".CoreV1().Pods(p.Namespace).Get(ctx, p.Name"},
		{"workload", "cluster", "", "pods/eviction", "create", drain, ".PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)"},
		// client-go's event recorder creates events and patches repeats.
		{"workload", "cluster", "", "events", "create patch", run, "StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(\"\")})"},
		{"workload", "cluster", "apps", "daemonsets", "list watch", informers, "f.Apps().V1().DaemonSets().Lister()"},
		{"workload", "cluster", "scheduling.k8s.io", "podgroups", "list watch", informers, "f.Scheduling().V1beta1().PodGroups().Lister()"},
		// Volcano's gangs (--bypassed-scheduler-names=volcano): a dynamic informer.
		{"workload", "cluster", "scheduling.volcano.sh", "podgroups", "list watch", informers, "dyn.ForResource(view.VolcanoPodGroupsResource()).Lister()"},
		{"workload", "cluster", "policy", "poddisruptionbudgets", "list watch", informers, "f.Policy().V1().PodDisruptionBudgets().Lister()"},
		{"workload", "cluster", "resource.k8s.io", "resourceslices", "list watch", informers, "r.ResourceSlices().Lister()"},
		// Without the autoscaler's informers (the CLI) templates copied
		// from members list their slices.
		{"workload", "cluster", "resource.k8s.io", "resourceslices", "list", apinodes, "c.ResourceV1().ResourceSlices().List(ctx"},
		{"workload", "cluster", "resource.k8s.io", "deviceclasses", "list watch", informers, "r.DeviceClasses().Lister()"},
		{"workload", "cluster", "resource.k8s.io", "resourceclaims", "list watch", informers, "r.ResourceClaims().Lister()"},
		{"workload", "cluster", "resource.k8s.io", "resourceclaimtemplates", "list watch", informers, "r.ResourceClaimTemplates().Lister()"},
		{"workload", "cluster", "resource.k8s.io", "devicetaintrules", "list watch", informers, "r.DeviceTaintRules().Lister()"},
		// Status ConfigMap (by name; create cannot be) and the leader lease
		// (client-go's LeaseLock gets, creates and updates it).
		{"workload", "release", "", "configmaps", "get", status, "c.Get(ctx, a.cfg.StatusName"},
		{"workload", "release", "", "configmaps", "create", status, "c.Create(ctx, cm"},
		{"workload", "release", "", "configmaps", "update", status, "c.Update(ctx, cm"},
		{"workload", "release", "", "configmaps", "delete", status, ".ConfigMaps(a.cfg.StatusNamespace).Delete(ctx, a.cfg.StatusName"},
		{"workload", "release", "", "configmaps", "list watch", run, "f.Core().V1().ConfigMaps().Lister().ConfigMaps(o.namespace)"},
		{"workload", "release", "coordination.k8s.io", "leases", "get create update", run, "resourcelock.New(o.resourceLock, o.namespace, o.leaderElectLeaseName"},

		// The local and kwok providers make and remove nodes as API objects
		// with their slices (cloudprovider/apinodes).
		{"apinodes", "cluster", "", "nodes", "create", apinodes, "c.CoreV1().Nodes().Create(ctx, node"},
		{"apinodes", "cluster", "", "nodes", "delete", apinodes, "c.CoreV1().Nodes().Delete(ctx, name"},
		{"apinodes", "cluster", "", "pods", "list", apinodes, "c.CoreV1().Pods(\"\").List(ctx"},
		{"apinodes", "cluster", "", "pods", "delete", apinodes, "c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name"},
		{"apinodes", "cluster", "resource.k8s.io", "resourceslices", "create", apinodes, "c.ResourceV1().ResourceSlices().Create(ctx, s"},
		{"apinodes", "cluster", "resource.k8s.io", "resourceslices", "deletecollection", apinodes, "c.ResourceV1().ResourceSlices().DeleteCollection(ctx"},

		// The local provider plays the kubelet: Ready, taints, template
		// slices copied from members.
		{"local", "cluster", "", "nodes", "list", local, ".CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodegroup.GroupLabel})"},
		{"local", "cluster", "", "nodes", "update", lifecycle, "c.Update(ctx, updated"},
		{"local", "cluster", "", "nodes/status", "update", local, ".CoreV1().Nodes().UpdateStatus(ctx, created"},

		// The kwok provider: its ConfigMaps in the release's namespace,
		// template nodes and their slices from the cluster.
		{"kwok", "release", "", "configmaps", "get", kwok, "opts.Client.CoreV1().ConfigMaps(opts.Namespace).Get(ctx, opts.ConfigName"},
		{"kwok", "release", "", "configmaps", "get", kwok, "opts.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name"},
		{"kwok", "release", "", "configmaps", "get", kwokTmpl, "c.CoreV1().ConfigMaps(namespace).Get(ctx, name"},
		{"kwok", "cluster", "", "nodes", "list", kwokTmpl, "c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})"},
		{"kwok", "cluster", "resource.k8s.io", "resourceslices", "list", kwok, "opts.Client.ResourceV1().ResourceSlices().List(ctx"},

		// ProvisioningRequests (--enable-provisioning-requests): the
		// informer, a discovery check at start-up, status writes and the
		// deletion of finished requests; PodTemplates from the informer.
		{"provreq", "cluster", "autoscaling.x-k8s.io", "provisioningrequests", "list watch", informers, "pr.Autoscaling().V1().ProvisioningRequests().Lister()"},
		{"provreq", "cluster", "autoscaling.x-k8s.io", "provisioningrequests", "list watch", run, "requests.Autoscaling().V1().ProvisioningRequests().Informer()"},
		{"provreq", "cluster", "autoscaling.x-k8s.io", "provisioningrequests", "get", provReq, "Get(ctx, name, metav1.GetOptions{})"},
		{"provreq", "cluster", "autoscaling.x-k8s.io", "provisioningrequests/status", "update", provReq, "w.c.AutoscalingV1().ProvisioningRequests(pr.Namespace).UpdateStatus(ctx"},
		{"provreq", "cluster", "autoscaling.x-k8s.io", "provisioningrequests", "delete", provReq, "w.c.AutoscalingV1().ProvisioningRequests(namespace).Delete(ctx"},
		{"templates-for-batch", "cluster", "", "podtemplates", "list watch", informers, "f.Core().V1().PodTemplates().Lister()"},
		// CapacityBuffers (--capacity-buffer-*-enabled): a dynamic informer
		// and status writes.
		{"buffers", "cluster", "autoscaling.x-k8s.io", "capacitybuffers", "list watch", informers, "dyn.ForResource(capacitybuffer.GroupVersionResource()).Lister()"},
		{"buffers", "cluster", "apps", "deployments", "list watch", informers, "apps.Deployments().Lister()"},
		{"buffers", "cluster", "apps", "replicasets", "list watch", informers, "apps.ReplicaSets().Lister()"},
		{"buffers", "cluster", "apps", "statefulsets", "list watch", informers, "apps.StatefulSets().Lister()"},
		{"buffers", "cluster", "batch", "jobs", "list watch", informers, "f.Batch().V1().Jobs().Lister()"},
		{"buffers", "cluster", "", "resourcequotas", "list watch", informers, "f.Core().V1().ResourceQuotas().Lister()"},
		{"buffers", "cluster", "", "podtemplates", "create", "autoscaler/buffers/buffers.go",
			"w.c.CoreV1().PodTemplates(want.Namespace).Create(ctx, want"},
		{"buffers", "cluster", "", "podtemplates", "update", "autoscaler/buffers/buffers.go",
			"w.c.CoreV1().PodTemplates(want.Namespace).Update(ctx, update"},
		{"buffers", "cluster", "autoscaling.x-k8s.io", "capacitybuffers/status", "update", "autoscaler/buffers/buffers.go",
			"w.c.Resource(cb.GroupVersionResource()).Namespace(b.Namespace).UpdateStatus(ctx, u"},

		// The clusterapi provider, in the management cluster.
		{"clusterapi", "cluster", "cluster.x-k8s.io", "machinedeployments machinesets machinepools machines", "list", capi,
			"p.opts.Dynamic.Resource(gvr).Namespace(ns).List(ctx"},
		{"clusterapi", "cluster", "cluster.x-k8s.io", "machinedeployments machinesets machinepools machines", "watch", capiWatch,
			"dynamicinformer.NewFilteredDynamicInformer(w.dynamic, gvr, ns"},
		{"clusterapi", "cluster", "cluster.x-k8s.io", "machinedeployments/scale machinesets/scale machinepools/scale", "get", capi,
			`client.Get(ctx, g.res.Name, metav1.GetOptions{}, "scale")`},
		{"clusterapi", "cluster", "cluster.x-k8s.io", "machinedeployments/scale machinesets/scale machinepools/scale", "update", capi,
			`client.Update(ctx, s, metav1.UpdateOptions{}, "scale")`},
		{"clusterapi", "cluster", "cluster.x-k8s.io", "machines", "get", capi, "m, err := client.Get(ctx, name"},
		{"clusterapi", "cluster", "cluster.x-k8s.io", "machines", "update", capi, "client.Update(ctx, m, metav1.UpdateOptions{})"},
		{"clusterapi", "cluster", "infrastructure.cluster.x-k8s.io", "*", "get", capi,
			"p.opts.Dynamic.Resource(mapping.Resource).Namespace(res.Namespace).Get(ctx, ref.Name"},
		{"clusterapi", "cluster", "infrastructure.cluster.x-k8s.io", "*", "list watch", capiWatch,
			"dynamicinformer.NewFilteredDynamicInformer(w.dynamic, key.resource, key.namespace"},
		{"clusterapi", "templates", "", "configmaps", "get", capi, "p.opts.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name"},
		// The externalgrpc provider's template ConfigMap, by a Role in its
		// namespace limited to it.
		{"externalgrpc", "templates", "", "configmaps", "get", egrpcTmpl, "p.opts.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name"},
	}
}

// grantKey is one verb on one resource in one scope.
func grantKey(scope, group, resource, verb string) string {
	return fmt.Sprintf("%s %s/%s %s", scope, group, resource, verb)
}

// expand lists a use's grants.
func (u use) expand() []string {
	var out []string
	for _, r := range strings.Fields(u.resource) {
		for _, v := range strings.Fields(u.verbs) {
			out = append(out, grantKey(u.scope, u.group, r, v))
		}
	}
	return out
}

// Every use's call is in its file: a removed or renamed call fails here,
// and its grant with it.
func TestRBACUsesAreInTheCode(t *testing.T) {
	for _, u := range autoscalerUses() {
		data, err := os.ReadFile(filepath.Join(root, u.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), u.call) {
			t.Errorf("%s no longer calls %s: the grant %v it justifies must go (charts/draxr/templates/autoscaler-rbac.yaml) or the table follow the code",
				u.file, u.call, u.expand())
		}
	}
}

// typedCall matches a typed client call chained to its resource
// (c.CoreV1().Pods(ns).Delete(...)); informerCall an informer's Lister or
// Informer (list and watch).
var (
	typedCall    = regexp.MustCompile(`\.(CoreV1|ResourceV1|PolicyV1|AppsV1|CoordinationV1|AutoscalingV1)\(\)\.(\w+)\([^()]*\)\.(\w+)\(`)
	informerCall = regexp.MustCompile(`\.(\w+)\(\)\.(Lister|Informer)\(\)`)
)

// The other way: every typed client call and informer in the
// autoscaler's code is a use of the table (same file, resource and
// verb), so a new call without its grant fails here.
func TestRBACCodeCallsAreUses(t *testing.T) {
	resources := map[string][2]string{ // client method -> group, resource
		"Nodes": {"", "nodes"}, "Pods": {"", "pods"}, "ConfigMaps": {"", "configmaps"}, "Events": {"", "events"},
		"Evictions": {"", "pods/eviction"}, "Leases": {"coordination.k8s.io", "leases"},
		"DaemonSets": {"apps", "daemonsets"}, "PodDisruptionBudgets": {"policy", "poddisruptionbudgets"},
		"ResourceSlices": {"resource.k8s.io", "resourceslices"}, "DeviceClasses": {"resource.k8s.io", "deviceclasses"},
		"ResourceClaims": {"resource.k8s.io", "resourceclaims"}, "ResourceClaimTemplates": {"resource.k8s.io", "resourceclaimtemplates"},
		"DeviceTaintRules": {"resource.k8s.io", "devicetaintrules"},
		"PodTemplates":     {"", "podtemplates"}, "ProvisioningRequests": {"autoscaling.x-k8s.io", "provisioningrequests"},
		"Deployments": {"apps", "deployments"}, "ReplicaSets": {"apps", "replicasets"}, "StatefulSets": {"apps", "statefulsets"},
		"Jobs": {"batch", "jobs"}, "ResourceQuotas": {"", "resourcequotas"},
		"PodGroups": {"scheduling.k8s.io", "podgroups"},
	}
	verbs := map[string]string{"Get": "get", "List": "list", "Watch": "watch", "Create": "create", "Update": "update",
		"UpdateStatus": "update", "Patch": "patch", "Delete": "delete", "DeleteCollection": "deletecollection", "Evict": "create"}
	have := map[string]bool{} // file + grant without scope
	for _, u := range autoscalerUses() {
		for _, r := range strings.Fields(u.resource) {
			for _, v := range strings.Fields(u.verbs) {
				have[u.file+" "+u.group+"/"+r+" "+v] = true
			}
		}
	}
	var files []string
	for _, dir := range []string{"autoscaler/app", "autoscaler/core", "autoscaler/clusterstate", "cloudprovider/local", "cloudprovider/clusterapi",
		"cloudprovider/externalgrpc", "cloudprovider/apinodes", "cloudprovider/kwok", "autoscaler/provisioning"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	// Of autoscaler/liveview, the autoscaler uses the informers only
	// (Read and Watch are draxr simulate's).
	files = append(files, filepath.Join(root, "autoscaler/liveview/informers.go"))
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		check := func(method, verb, match string) {
			r, ok := resources[method]
			if !ok {
				t.Errorf("%s: %s: resource %s unknown to this test; add it with its grant", rel, match, method)
				return
			}
			if verb == "update" && strings.Contains(match, "UpdateStatus") {
				r[1] += "/status"
			}
			found++
			if !have[rel+" "+r[0]+"/"+r[1]+" "+verb] {
				t.Errorf("%s calls %s (%s %s/%s) and autoscalerUses has no such use: add it, and its grant to the chart", rel, match, verb, r[0], r[1])
			}
		}
		for _, m := range typedCall.FindAllStringSubmatch(string(data), -1) {
			v, ok := verbs[m[3]]
			if !ok {
				continue // not an API call (e.g. a lister's namespace)
			}
			check(m[2], v, m[0])
		}
		for _, m := range informerCall.FindAllStringSubmatch(string(data), -1) {
			check(m[1], "list", m[0])
			check(m[1], "watch", m[0])
		}
	}
	if found < 20 {
		t.Fatalf("found %d calls: the patterns no longer match the code", found)
	}
}

// renderedGrants are the autoscaler's grants as rendered: its
// ClusterRole, its Role in the release's namespace, and the template
// ConfigMap Roles (namespaces listed apart).
func renderedGrants(t *testing.T, docs []Doc) (grants map[string]bool, templateNamespaces []string) {
	t.Helper()
	grants = map[string]bool{}
	for _, d := range docs {
		if d.Component() != "autoscaler" || (d.Kind() != "ClusterRole" && d.Kind() != "Role") {
			continue
		}
		scope := "cluster"
		switch {
		case d.Kind() == "Role" && strings.HasSuffix(d.Name(), "-templates"):
			scope = "templates"
			templateNamespaces = append(templateNamespaces, d.Namespace())
		case d.Kind() == "Role":
			scope = "release"
		}
		for _, r := range rules(t, d.Object) {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						grants[grantKey(scope, g, res, v)] = true
					}
				}
			}
		}
	}
	sort.Strings(templateNamespaces)
	return grants, templateNamespaces
}

// The chart grants, per provider and clusterAPIMode, exactly the uses of
// the sides the ServiceAccount reaches in its own cluster: nothing no code
// path uses, nothing a code path uses missing.
func TestRBACIsTheCodesUses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		sides  []string
		tmplNS []string
	}{
		{"local", map[string]any{"autoscaler": map[string]any{"cloudProvider": "local", "nodeGroupsConfigMap": "g"}},
			[]string{"workload", "apinodes", "local"}, nil},
		{"kwok", map[string]any{"autoscaler": map[string]any{"cloudProvider": "kwok"}},
			[]string{"workload", "apinodes", "kwok"}, nil},
		{"clusterapi", nil, []string{"workload", "clusterapi"}, nil},
		{"clusterapi, discovery by namespace", map[string]any{"cloudProvider": "clusterapi", "autoDiscovery": map[string]any{"namespace": "capi-a"},
			"autoscaler": map[string]any{"clusterAPI": map[string]any{"autoDiscovery": []any{"clusterapi:namespace=capi-b,clusterName=x"}}}},
			[]string{"workload", "clusterapi"}, []string{"capi-a", "capi-b"}},
		{"clusterapi, configMapNamespaces", map[string]any{"autoscaler": map[string]any{"clusterAPI": map[string]any{"configMapNamespaces": []any{"t"}}}},
			[]string{"workload", "clusterapi"}, []string{"t"}},
		{"incluster-kubeconfig", map[string]any{"clusterAPIMode": "incluster-kubeconfig"}, []string{"workload"}, nil},
		{"kubeconfig-incluster", map[string]any{"clusterAPIMode": "kubeconfig-incluster", "autoscaler": map[string]any{"clusterAPI": map[string]any{"configMapNamespaces": []any{"t"}}}},
			[]string{"clusterapi"}, []string{"t"}},
		{"kubeconfig-kubeconfig", map[string]any{"clusterAPIMode": "kubeconfig-kubeconfig"}, nil, nil},
		{"single-kubeconfig", map[string]any{"clusterAPIMode": "single-kubeconfig"}, nil, nil},
		{"externalgrpc", map[string]any{"cloudProvider": "externalgrpc", "autoscaler": map[string]any{"externalGRPC": map[string]any{"address": "p:8086"}}},
			[]string{"workload", "externalgrpc"}, nil},
		{"externalgrpc, template ConfigMap", map[string]any{"autoscaler": map[string]any{"cloudProvider": "externalgrpc",
			"externalGRPC": map[string]any{"address": "p:8086", "templateSlicesConfigMap": "gpu-ops/slices"}}},
			[]string{"workload", "externalgrpc"}, []string{"gpu-ops"}},
		{"provisioning requests", map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"enable-provisioning-requests": true}}},
			[]string{"workload", "clusterapi", "provreq", "templates-for-batch"}, nil},
		{"capacity buffers", map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"capacity-buffer-pod-injection-enabled": true}}},
			[]string{"workload", "clusterapi", "buffers", "templates-for-batch"}, nil},
		{"provisioning requests, flag without a value", map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"enable-provisioning-requests": nil}}},
			[]string{"workload", "clusterapi", "provreq", "templates-for-batch"}, nil},
		{"provisioning requests off", map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"enable-provisioning-requests": false}}},
			[]string{"workload", "clusterapi"}, nil},
		{"plain manifests", PlainValues(), []string{"workload", "apinodes", "local", "kwok", "clusterapi", "externalgrpc"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ns := renderedGrants(t, render(t, tc.values))
			want := map[string]bool{}
			for _, u := range autoscalerUses() {
				if slices.Contains(tc.sides, u.side) {
					for _, g := range u.expand() {
						want[g] = true
					}
				}
			}
			if len(tc.tmplNS) == 0 {
				for g := range want {
					if strings.HasPrefix(g, "templates ") {
						delete(want, g)
					}
				}
			}
			for g := range got {
				if !want[g] {
					t.Errorf("the chart grants %s, which no code path uses", g)
				}
			}
			for g := range want {
				if !got[g] {
					t.Errorf("the code uses %s, which the chart does not grant", g)
				}
			}
			if !slices.Equal(ns, tc.tmplNS) {
				t.Errorf("template ConfigMap Roles in %v, want %v", ns, tc.tmplNS)
			}
		})
	}
}
