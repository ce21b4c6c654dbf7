// Package doctor finds the KEP-5004 pitfalls that silently break
// scheduling of DRA-backed extended resources, in the objects the planner
// loads (a dump or a live cluster). It only reads; every finding names the
// objects involved and what to do.
package doctor

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"draxr.dev/draxr/scheduler/classes"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// Severity says whether a finding breaks scheduling (error) or may (warning).
type Severity string

const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Stable check names: scripts match on them, so they never change.
const (
	CheckDevicePluginAndDRA      = "device-plugin-and-dra-same-name"
	CheckDuplicateExtendedName   = "duplicate-extended-resource-name"
	CheckResourceSliceCount      = "resource-slice-count-mismatch"
	CheckClaimDeviceLimit        = "claim-device-limit"
	CheckStaleExtendedClaim      = "stale-extended-resource-claim"
	CheckInvalidImplicitName     = "invalid-implicit-extended-resource-name"
	CheckDeviceClassSelectorFail = "device-class-selector-error"
	CheckStockScheduler          = "stock-kube-scheduler"
	CheckTaintRuleWholeGroup     = "device-taint-rule-covers-group"
	CheckDeviceCounters          = "device-counters-invalid"
	CheckClassMatchesNothing     = "device-class-matches-no-device"
	CheckClassMissing            = "device-class-missing"
	CheckGroupDevicesDiffer      = "node-group-devices-differ"
)

// MaxDevicesPerClaim is the allocator's limit on one claim
// (resourceapi.AllocationResultsMaxSize); the scheduler puts all of a
// pod's DRA-backed extended resources into one claim.
const MaxDevicesPerClaim = resourceapi.AllocationResultsMaxSize

// ExtendedResourceClaimAnnotation marks the claim the scheduler creates for
// a pod's DRA-backed extended resources.
const ExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"

// Object names one object a finding is about.
type Object struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

func objectOf(kind string, m metav1.Object) Object {
	return Object{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
}

// Finding is one problem.
type Finding struct {
	Severity Severity `json:"severity"`
	Check    string   `json:"check"`
	Objects  []Object `json:"objects"`
	Message  string   `json:"message"`
	Advice   string   `json:"advice"`
}

// Check runs every check on objs. Findings are sorted by check, then by
// their first object, so output is stable.
func Check(objs *input.Objects) []Finding {
	idx := classes.NewIndex()
	for _, c := range objs.DeviceClasses {
		idx.Set(c)
	}
	d := &doctor{objs: objs, classes: idx, matcher: dynres.NewMatcher()}
	d.classSelectors()
	d.duplicateNames()
	d.implicitNames()
	d.devicePluginAndDRA()
	d.sliceCounts()
	d.claimLimit()
	d.staleClaims()
	d.stockScheduler()
	d.taintRulesCoverGroups()
	d.counters()
	d.classesMatchNothing()
	d.missingClasses()
	d.groupDevicesDiffer()
	d.provisioningRequests()
	d.kueueManagedResources()
	d.topology()
	d.nodeAllocatable()
	d.daemonSetTemplates()
	sort.SliceStable(d.findings, func(i, j int) bool {
		a, b := d.findings[i], d.findings[j]
		if a.Check != b.Check {
			return a.Check < b.Check
		}
		return a.Objects[0].String() < b.Objects[0].String()
	})
	return d.findings
}

type doctor struct {
	objs     *input.Objects
	classes  *classes.Index
	matcher  *dynres.Matcher
	findings []Finding
}

func (d *doctor) add(f Finding) { d.findings = append(d.findings, f) }

// sortedClasses returns the DeviceClasses sorted by name.
func (d *doctor) sortedClasses() []*resourceapi.DeviceClass {
	list, _ := d.classes.List()
	return list
}

func (d *doctor) classSelectors() {
	for _, c := range d.sortedClasses() {
		if err := d.matcher.ClassError(c); err != nil {
			d.add(Finding{
				Severity: Error, Check: CheckDeviceClassSelectorFail,
				Objects: []Object{objectOf("DeviceClass", c)},
				Message: err.Error(),
				Advice:  "fix the CEL expression; no device matches this class, so its extended resource names are never satisfied",
			})
		}
	}
}

// duplicateNames: two classes mapping one name is the KEP's way to
// migrate (a newer class takes the name over), so it is a warning that
// says who gets what. It breaks only where upstream's class cache serves
// the name: that cache depends on informer order and may drop the losing
// class's implicit name, so a pod asking for it while a stock
// kube-scheduler runs can stay pending (an error). The same cache backs
// the API server's ResourceQuota evaluator, which draxr cannot replace.
func (d *doctor) duplicateNames() {
	byName := map[string][]*resourceapi.DeviceClass{}
	for _, c := range d.sortedClasses() {
		if c.Spec.ExtendedResourceName != nil {
			byName[*c.Spec.ExtendedResourceName] = append(byName[*c.Spec.ExtendedResourceName], c)
		}
	}
	names := make([]string, 0, len(byName))
	for n, list := range byName {
		if len(list) > 1 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	stock := d.stockSchedulerPods()
	for _, n := range names {
		list := byName[n]
		winner := d.classes.GetDeviceClass(v1.ResourceName(n))
		var objects []Object
		var losers, gets []string
		for _, c := range list {
			objects = append(objects, objectOf("DeviceClass", c))
			if c != winner {
				losers = append(losers, c.Name)
				gets = append(gets, fmt.Sprintf("pods asking %s get %s's devices", classes.ImplicitName(c.Name), c.Name))
			}
		}
		f := Finding{
			Severity: Warning, Check: CheckDuplicateExtendedName, Objects: objects,
			Message: fmt.Sprintf("DeviceClasses %s all map extended resource %s; by the KEP's tie-break (newest creationTimestamp, then first name) %s wins: pods asking %s get %s's devices, %s",
				joinNames(list), n, winner.Name, n, winner.Name, strings.Join(gets, ", ")),
			Advice: fmt.Sprintf("this is the KEP's migration path; once no workload needs %s under %s, clear it on %s (spec.extendedResourceName) or delete that class. Run draxr-scheduler: a stock kube-scheduler, and the API server's ResourceQuota evaluator, use upstream's class cache, which may drop the implicit name %s while both classes map %s",
				strings.Join(losers, ", "), n, strings.Join(losers, ", "), implicitNames(losers), n),
		}
		if users := d.podsAsking(losers); len(users) > 0 && len(stock) > 0 {
			f.Severity = Error
			for _, p := range users {
				f.Objects = append(f.Objects, objectOf("Pod", p))
			}
			f.Message += fmt.Sprintf("; pods %s ask the implicit name %s while stock kube-scheduler %s runs, whose cache may have lost it (they stay pending)",
				podNames(users), implicitNames(losers), podNames(stock))
			f.Advice = fmt.Sprintf("run draxr-scheduler instead of the stock kube-scheduler, or have those pods ask %s; then clear it on %s (spec.extendedResourceName)",
				n, strings.Join(losers, ", "))
		}
		d.add(f)
	}
}

// podsAsking returns the pods (pending first) whose containers ask the
// implicit name of one of classNames.
func (d *doctor) podsAsking(classNames []string) []*v1.Pod {
	wanted := map[v1.ResourceName]bool{}
	for _, c := range classNames {
		wanted[classes.ImplicitName(c)] = true
	}
	var out []*v1.Pod
	for _, list := range [][]*v1.Pod{d.objs.PendingPods, d.objs.RunningPods} {
		for _, p := range list {
			if asksAny(p, wanted) {
				out = append(out, p)
			}
		}
	}
	return out
}

func asksAny(p *v1.Pod, names map[v1.ResourceName]bool) bool {
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, l := range []v1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for name := range l {
					if names[name] {
						return true
					}
				}
			}
		}
	}
	return false
}

func podNames(pods []*v1.Pod) string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Namespace + "/" + p.Name
	}
	return strings.Join(out, ", ")
}

func joinNames(list []*resourceapi.DeviceClass) string {
	names := make([]string, len(list))
	for i, c := range list {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

func implicitNames(classNames []string) string {
	out := make([]string, len(classNames))
	for i, n := range classNames {
		out[i] = string(classes.ImplicitName(n))
	}
	return strings.Join(out, ", ")
}

// implicitNames: a class name is a DNS subdomain (up to 253 characters),
// but the name part of a resource name allows at most 63, so a long class
// name yields an implicit name no pod can ask for.
func (d *doctor) implicitNames() {
	for _, c := range d.sortedClasses() {
		name := string(classes.ImplicitName(c.Name))
		errs := validation.IsQualifiedName(name)
		// Quota names the resource as requests.<name>, and the API server
		// checks that form for extended resources in pod requests.
		errs = append(errs, validation.IsQualifiedName("requests."+name)...)
		if len(errs) == 0 {
			continue
		}
		d.add(Finding{
			Severity: Warning, Check: CheckInvalidImplicitName,
			Objects: []Object{objectOf("DeviceClass", c)},
			Message: fmt.Sprintf("implicit extended resource name %s is not a valid resource name: %s", name, dedupeJoin(errs)),
			Advice:  "pods cannot request this class by its implicit name; rename the class (at most 63 characters) or set spec.extendedResourceName",
		})
	}
}

func dedupeJoin(errs []string) string {
	seen := map[string]bool{}
	var out []string
	for _, e := range errs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return strings.Join(out, "; ")
}

// classNames returns every extended resource name a class may be asked by:
// its explicit name (whether or not it wins it: a stock scheduler may pick
// differently) and its implicit name.
func classNames(c *resourceapi.DeviceClass) []v1.ResourceName {
	names := []v1.ResourceName{classes.ImplicitName(c.Name)}
	if c.Spec.ExtendedResourceName != nil {
		names = append([]v1.ResourceName{v1.ResourceName(*c.Spec.ExtendedResourceName)}, names...)
	}
	return names
}

// devicePluginAndDRA: NodeResourcesFit serves a name from allocatable when
// it is non-zero, so the DRA devices behind the same name on that node are
// never handed out for it (and the two paths count differently).
func (d *doctor) devicePluginAndDRA() {
	slicesByNode := map[string][]*resourceapi.ResourceSlice{}
	for _, s := range d.objs.ResourceSlices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			slicesByNode[*s.Spec.NodeName] = append(slicesByNode[*s.Spec.NodeName], s)
		}
	}
	for _, n := range d.objs.Nodes {
		alloc := n.Status.Allocatable
		if len(alloc) == 0 {
			alloc = n.Status.Capacity
		}
		d.bothPaths(objectOf("Node", n), alloc, slicesByNode[n.Name], "node")
	}
	for _, g := range d.objs.NodeGroups {
		alloc := g.Spec.Template.Status.Allocatable
		if len(alloc) == 0 {
			alloc = g.Spec.Template.Status.Capacity
		}
		var slices []*resourceapi.ResourceSlice
		for i := range g.Spec.ResourceSlices {
			slices = append(slices, &resourceapi.ResourceSlice{Spec: g.Spec.ResourceSlices[i]})
		}
		d.bothPaths(objectOf(nodegroup.Kind, g), alloc, slices, "template node")
	}
}

func (d *doctor) bothPaths(obj Object, alloc v1.ResourceList, slices []*resourceapi.ResourceSlice, what string) {
	if len(slices) == 0 {
		return
	}
	for _, c := range d.sortedClasses() {
		var byPlugin []v1.ResourceName
		for _, name := range classNames(c) {
			if d.classes.GetDeviceClass(name) != c {
				continue // another class backs the name (the KEP's tie-break)
			}
			if q, ok := alloc[name]; ok && !q.IsZero() {
				byPlugin = append(byPlugin, name)
			}
		}
		if len(byPlugin) == 0 {
			continue
		}
		devices := d.matching(c, slices)
		if devices == 0 {
			continue
		}
		for _, name := range byPlugin {
			q := alloc[name]
			d.add(Finding{
				Severity: Warning, Check: CheckDevicePluginAndDRA,
				Objects: []Object{obj, objectOf("DeviceClass", c)},
				Message: fmt.Sprintf("%s %s advertises %s twice: %s in allocatable (device plugin) and %d devices of DeviceClass %s (DRA); the scheduler uses only the device plugin's count there",
					what, obj.Name, name, q.String(), devices, c.Name),
				Advice: "serve each name one way per node: stop the device plugin on DRA nodes (allocatable must be 0 for the name) or label the nodes apart",
			})
		}
	}
}

func (d *doctor) matching(c *resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice) int {
	n := 0
	for _, s := range slices {
		for i := range s.Spec.Devices {
			if ok, err := d.matcher.Matches(c, s.Spec.Driver, &s.Spec.Devices[i]); err == nil && ok {
				n++
			}
		}
	}
	return n
}

// sliceCounts: the allocator uses a pool only when it sees exactly
// resourceSliceCount slices of the pool's newest generation; a pool belongs
// to one driver, so slices are counted per driver and pool.
func (d *doctor) sliceCounts() {
	type poolKey struct{ driver, pool string }
	pools := map[poolKey][]*resourceapi.ResourceSlice{}
	for _, s := range d.objs.ResourceSlices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		pools[k] = append(pools[k], s)
	}
	keys := make([]poolKey, 0, len(pools))
	for k := range pools {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].driver != keys[j].driver {
			return keys[i].driver < keys[j].driver
		}
		return keys[i].pool < keys[j].pool
	})
	for _, k := range keys {
		var newest int64
		for _, s := range pools[k] {
			newest = max(newest, s.Spec.Pool.Generation)
		}
		var current []*resourceapi.ResourceSlice
		counts := map[int64]bool{}
		for _, s := range pools[k] {
			if s.Spec.Pool.Generation == newest {
				current = append(current, s)
				counts[s.Spec.Pool.ResourceSliceCount] = true
			}
		}
		sort.Slice(current, func(i, j int) bool { return current[i].Name < current[j].Name })
		if len(counts) == 1 && counts[int64(len(current))] {
			continue
		}
		var declared []string
		for c := range counts {
			declared = append(declared, fmt.Sprint(c))
		}
		sort.Strings(declared)
		objects := make([]Object, len(current))
		for i, s := range current {
			objects[i] = objectOf("ResourceSlice", s)
		}
		d.add(Finding{
			Severity: Error, Check: CheckResourceSliceCount, Objects: objects,
			Message: fmt.Sprintf("pool %s of driver %s (generation %d) has %d ResourceSlices but spec.pool.resourceSliceCount says %s; the allocator treats the pool as incomplete and allocates nothing from it",
				k.pool, k.driver, newest, len(current), strings.Join(declared, " and ")),
			Advice: fmt.Sprintf("make the driver publish resourceSliceCount %d on every slice of the pool (count only this driver's slices), or publish the missing slices", len(current)),
		})
	}
}

// claimLimit: all of a pod's DRA-backed extended resources go into one
// claim, which holds at most 32 devices; above that the scheduler errors
// on every attempt and the pod is never bound.
func (d *doctor) claimLimit() {
	for _, p := range d.objs.PendingPods {
		total, names := d.extendedDevices(p)
		if total <= MaxDevicesPerClaim {
			continue
		}
		d.add(Finding{
			Severity: Error, Check: CheckClaimDeviceLimit,
			Objects: []Object{objectOf("Pod", p)},
			Message: fmt.Sprintf("pod %s/%s asks for %d DRA-backed extended-resource devices (%s); one claim holds at most %d, so the scheduler fails it on every DRA node and it is never bound",
				p.Namespace, p.Name, total, strings.Join(names, ", "), MaxDevicesPerClaim),
			Advice: fmt.Sprintf("ask for at most %d devices per pod (split the workload), or request the devices through explicit ResourceClaims", MaxDevicesPerClaim),
		})
	}
}

// extendedDevices counts the devices the scheduler's extended-resource
// claim for p would request: per mapped name, every long-lived container
// (regular or sidecar) adds its own; non-sidecar init containers reuse the
// devices of long-lived containers after them and add only the largest
// shortfall.
func (d *doctor) extendedDevices(p *v1.Pod) (int, []string) {
	containers := append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	names := map[v1.ResourceName]bool{}
	for _, c := range containers {
		for n := range c.Resources.Requests {
			if dynres.IsExtended(n) && d.classes.GetDeviceClass(n) != nil {
				names[n] = true
			}
		}
	}
	var sorted []v1.ResourceName
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	total := 0
	var parts []string
	for _, n := range sorted {
		req := make([]int64, len(containers))
		longLived := make([]bool, len(containers))
		for i, c := range containers {
			if q, ok := c.Resources.Requests[n]; ok {
				req[i], _ = q.AsInt64()
			}
			isInit := i < len(p.Spec.InitContainers)
			longLived[i] = !isInit || (c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways)
		}
		var long, shortMax int64
		for i := range containers {
			if longLived[i] {
				long += req[i]
				continue
			}
			var reusable int64
			for j := i; j < len(containers); j++ {
				if longLived[j] {
					reusable += req[j]
				}
			}
			shortMax = max(shortMax, req[i]-reusable)
		}
		count := long + shortMax
		if count > 0 {
			total += int(count)
			parts = append(parts, fmt.Sprintf("%s: %d", n, count))
		}
	}
	return total, parts
}

// staleClaims: an extended-resource claim is owned by its pod; once the pod
// is gone the garbage collector should delete it, and until then its
// allocated devices are taken from everyone.
func (d *doctor) staleClaims() {
	type podKey struct{ namespace, name string }
	pods := map[podKey]*v1.Pod{}
	for _, list := range [][]*v1.Pod{d.objs.RunningPods, d.objs.PendingPods} {
		for _, p := range list {
			pods[podKey{p.Namespace, p.Name}] = p
		}
	}
	for _, c := range d.objs.ResourceClaims {
		if c.Annotations[ExtendedResourceClaimAnnotation] != "true" {
			continue
		}
		owner := metav1.GetControllerOf(c)
		var why string
		switch {
		case owner == nil || owner.Kind != "Pod":
			why = "has no owning pod (no controller owner reference of kind Pod)"
		case pods[podKey{c.Namespace, owner.Name}] == nil:
			why = fmt.Sprintf("belongs to pod %s/%s, which does not exist", c.Namespace, owner.Name)
		case owner.UID != "" && pods[podKey{c.Namespace, owner.Name}].UID != owner.UID:
			why = fmt.Sprintf("belongs to an earlier pod %s/%s (UID %s; the current pod has UID %s)",
				c.Namespace, owner.Name, owner.UID, pods[podKey{c.Namespace, owner.Name}].UID)
		default:
			continue
		}
		devices := 0
		if c.Status.Allocation != nil {
			devices = len(c.Status.Allocation.Devices.Results)
		}
		d.add(Finding{
			Severity: Warning, Check: CheckStaleExtendedClaim,
			Objects: []Object{objectOf("ResourceClaim", c)},
			Message: fmt.Sprintf("extended-resource claim %s/%s %s; it still holds %d allocated devices", c.Namespace, c.Name, why, devices),
			Advice:  "delete the claim (kubectl delete resourceclaim -n " + c.Namespace + " " + c.Name + ") and check that the garbage collector runs",
		})
	}
}

// stockScheduler: upstream's class cache depends on informer order, so
// with explicit names in use a stock kube-scheduler can lose a class's
// mapping after a restart or when a class is cleared or deleted (the
// KEP's migration path); draxr-scheduler does not.
func (d *doctor) stockScheduler() {
	var mapped []string
	for _, c := range d.sortedClasses() {
		if c.Spec.ExtendedResourceName != nil {
			mapped = append(mapped, c.Name)
		}
	}
	if len(mapped) == 0 {
		return
	}
	for _, p := range d.stockSchedulerPods() {
		d.add(Finding{
			Severity: Warning, Check: CheckStockScheduler,
			Objects: []Object{objectOf("Pod", p)},
			Message: fmt.Sprintf("pod %s/%s runs a stock kube-scheduler while DeviceClasses %s map extended resource names; its class cache can lose a mapping after a restart or when a class is cleared or deleted",
				p.Namespace, p.Name, strings.Join(mapped, ", ")),
			Advice: "run draxr-scheduler (scheduler/deploy/) for pods that ask for DRA-backed extended resources",
		})
	}
}

// stockSchedulerPods returns the kube-scheduler pods in kube-system that
// are not draxr-scheduler.
func (d *doctor) stockSchedulerPods() []*v1.Pod {
	var out []*v1.Pod
	for _, list := range [][]*v1.Pod{d.objs.RunningPods, d.objs.PendingPods} {
		for _, p := range list {
			if p.Namespace == metav1.NamespaceSystem && p.Labels["component"] == "kube-scheduler" && !isDraxrScheduler(p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func isDraxrScheduler(p *v1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if strings.Contains(c.Image, "draxr-scheduler") || strings.Contains(strings.Join(c.Command, " "), "draxr-scheduler") {
			return true
		}
	}
	return false
}

// taintRulesCoverGroups: DeviceTaintRules (GA in Kubernetes 1.37) taint
// devices in every matching slice, a new node's too. A rule set that
// leaves no device of a group usable (NoSchedule or NoExecute) makes the
// group useless to pods asking DRA-backed extended resources, whose
// claims the scheduler creates without tolerations: the autoscaler will
// not scale it up for them.
func (d *doctor) taintRulesCoverGroups() {
	if len(d.objs.DeviceTaintRules) == 0 {
		return
	}
	for _, g := range d.objs.NodeGroups {
		_, slices := g.NewNode(g.Name + "-new-0")
		devices, blocked := 0, 0
		rules := map[string]bool{}
		for _, sl := range slices {
			tainted := snapshot.WithTaintRules(sl, d.objs.DeviceTaintRules)
			for i := range tainted.Spec.Devices {
				devices++
				if !blocks(tainted.Spec.Devices[i].Taints) {
					continue
				}
				blocked++
				for _, r := range d.objs.DeviceTaintRules {
					if snapshot.WithTaintRules(sl, []*resourceapi.DeviceTaintRule{r}) != sl && blocks([]resourceapi.DeviceTaint{r.Spec.Taint}) {
						rules[r.Name] = true
					}
				}
			}
		}
		if devices == 0 || blocked < devices {
			continue
		}
		objects := []Object{objectOf(nodegroup.Kind, g)}
		names := make([]string, 0, len(rules))
		for name := range rules {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			objects = append(objects, Object{Kind: "DeviceTaintRule", Name: name})
		}
		d.add(Finding{
			Severity: Warning, Check: CheckTaintRuleWholeGroup, Objects: objects,
			Message: fmt.Sprintf("DeviceTaintRules %s taint all %d devices of node group %s (NoSchedule or NoExecute), new nodes included; pods asking DRA-backed extended resources cannot tolerate device taints, so the group is never scaled up for them",
				strings.Join(names, ", "), devices, g.Name),
			Advice: "narrow the rules' deviceSelector (driver, pool, device) to the devices that are really affected, or delete the rules once the devices are fixed",
		})
	}
}

func blocks(taints []resourceapi.DeviceTaint) bool {
	for _, t := range taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}
