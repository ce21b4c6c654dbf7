package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// exported registers every metric (per-node-group ones too), gives each a
// series, and returns the families /metrics serves, by name.
func exported(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	Register(true)
	now := time.Now()
	l := GroupLabels{DRADrivers: []string{"gpu.example.com"}}
	UpdateClusterSafeToAutoscale(true)
	UpdateNodesCount(NodeCounts{Ready: 1})
	UpdateNodeGroupsCount(1)
	UpdateUnschedulablePodsCount(1, 0)
	UpdateMaxNodesCount(10)
	UpdateClusterResources(8, 1<<30)
	UpdateResourceLimits(0, 320000, 0, 6400000<<30)
	UpdateLastTime(FunctionMain, now)
	UpdateDuration(FunctionMain, time.Second)
	ObservePendingNodeDeletions(0)
	RegisterError(ErrorInternal)
	RegisterScaleUp(1, l)
	RegisterFailedScaleUp(FailedTimeout, l)
	RegisterFailedNodeCreations("QUOTA_EXCEEDED", 1)
	RegisterScaleDown(1, ScaleDownEmpty, l)
	RegisterEvictions(1, EvictionSucceeded)
	UpdateUnneededNodesCount(1)
	UpdateUnremovableNodesCount(map[string]int{"NoPlaceToMovePods": 1})
	UpdateScaleDownInCooldown(false)
	RegisterOldUnregisteredNodesRemoved(1)
	RegisterSkippedScaleEvent("up", "CpuResourceLimit")
	UpdateNodeTaintsCount(map[string]int{TaintOther: 1})
	UpdateDRATemplateMismatch(map[MismatchKey]int{{Driver: "gpu.example.com", Type: MismatchMissing}: 1})
	UpdateNodeGroups([]NodeGroupState{{Name: "gpu", Max: 10, Healthy: true}})
	RegisterPlannedDevices(map[string]int{"gpu.example.com": 8})
	UpdateDevices(map[string]float64{"gpu.example.com": 8}, map[string]int{"gpu.example.com": 8})
	RegisterExtendedResourcePodsHelped(map[string]int{"example.com/gpu": 1})
	UpdateUnhelpablePods(map[string]int{"MaxSizeReached": 1})
	UpdateProvisioningRequests(map[[2]string]int{{"check-capacity.autoscaling.x-k8s.io", "Provisioned"}: 1})

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), caNamespace+"_") || strings.HasPrefix(f.GetName(), draxrNamespace+"_") {
			out[f.GetName()] = f
		}
	}
	return out
}

// Every metric draxr declares is served, with CA's type and label names
// for CA's (pkg/metrics/metrics.go of the Cluster Autoscaler).
func TestCAMetricsNamesTypesLabels(t *testing.T) {
	families := exported(t)
	for _, name := range Names() {
		if families[name] == nil {
			t.Errorf("%s is declared but not served", name)
		}
	}
	if len(families) != len(Names()) {
		t.Errorf("served %d families, declared %d", len(families), len(Names()))
	}
	ca := []struct {
		name   string
		typ    dto.MetricType
		labels string
	}{
		{"cluster_safe_to_autoscale", dto.MetricType_GAUGE, ""},
		{"nodes_count", dto.MetricType_GAUGE, "state"},
		{"node_groups_count", dto.MetricType_GAUGE, "node_group_type"},
		{"unschedulable_pods_count", dto.MetricType_GAUGE, "type"},
		{"max_nodes_count", dto.MetricType_GAUGE, ""},
		{"cluster_cpu_current_cores", dto.MetricType_GAUGE, ""},
		{"cpu_limits_cores", dto.MetricType_GAUGE, "direction"},
		{"cluster_memory_current_bytes", dto.MetricType_GAUGE, ""},
		{"memory_limits_bytes", dto.MetricType_GAUGE, "direction"},
		{"last_activity", dto.MetricType_GAUGE, "activity"},
		{"function_duration_seconds", dto.MetricType_HISTOGRAM, "function"},
		{"function_duration_quantile_seconds", dto.MetricType_SUMMARY, "function"},
		{"pending_node_deletions", dto.MetricType_GAUGE, ""},
		{"errors_total", dto.MetricType_COUNTER, "type"},
		{"scaled_up_nodes_total", dto.MetricType_COUNTER, "dra_drivers,gpu_name,gpu_resource_name"},
		{"failed_scale_ups_total", dto.MetricType_COUNTER, "dra_drivers,gpu_name,gpu_resource_name,reason"},
		{"failed_node_creations_total", dto.MetricType_COUNTER, "reason"},
		{"scaled_down_nodes_total", dto.MetricType_COUNTER, "dra_drivers,gpu_name,gpu_resource_name,reason"},
		{"evicted_pods_total", dto.MetricType_COUNTER, "eviction_result"},
		{"unneeded_nodes_count", dto.MetricType_GAUGE, ""},
		{"unremovable_nodes_count", dto.MetricType_GAUGE, "reason"},
		{"scale_down_in_cooldown", dto.MetricType_GAUGE, ""},
		{"old_unregistered_nodes_removed_count", dto.MetricType_COUNTER, ""},
		{"skipped_scale_events_count", dto.MetricType_COUNTER, "direction,reason"},
		{"node_taints_count", dto.MetricType_GAUGE, "type"},
		{"dra_node_template_resources_mismatch", dto.MetricType_GAUGE, "driver,mismatch_type"},
		{"node_group_min_count", dto.MetricType_GAUGE, "node_group"},
		{"node_group_max_count", dto.MetricType_GAUGE, "node_group"},
		{"node_group_target_count", dto.MetricType_GAUGE, "node_group"},
		{"node_group_healthiness", dto.MetricType_GAUGE, "node_group"},
		{"node_group_backoff_status", dto.MetricType_GAUGE, "node_group,reason"},
	}
	for _, c := range ca {
		f := families["cluster_autoscaler_"+c.name]
		if f == nil {
			t.Errorf("cluster_autoscaler_%s not served", c.name)
			continue
		}
		if f.GetType() != c.typ {
			t.Errorf("cluster_autoscaler_%s is a %v, CA's is a %v", c.name, f.GetType(), c.typ)
		}
		var labels []string
		for _, lp := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		sort.Strings(labels)
		if got := strings.Join(labels, ","); got != c.labels {
			t.Errorf("cluster_autoscaler_%s labels = %q, CA's are %q", c.name, got, c.labels)
		}
	}
	// dra_drivers is CA's sorted comma-joined list.
	if got := (GroupLabels{DRADrivers: []string{"b.example", "a.example", "b.example"}}).draDrivers(); got != "a.example,b.example" {
		t.Errorf("dra_drivers = %q, want a.example,b.example", got)
	}
}

// promQLMetrics lists the metric names a PromQL expression selects:
// identifiers that are not functions, aggregations, keywords or label
// names, outside strings, label matchers, ranges and Grafana variables.
// It fails on unbalanced brackets or quotes.
func promQLMetrics(expr string) ([]string, error) {
	keywords := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "offset": true, "bool": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true}
	// Aggregations may put "by (...)" between their name and "(".
	aggregations := map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
		"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
		"limitk": true, "limit_ratio": true}
	labelLists := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	closing := map[byte]byte{'(': ')', '{': '}', '[': ']'}
	var names, stack []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
	}
	skipTo := func(i int, close byte) (int, error) { // i is just past the opener; returns past the closer
		for ; i < len(expr); i++ {
			switch expr[i] {
			case close:
				return i + 1, nil
			case '"', '\'', '`':
				q := expr[i]
				for i++; i < len(expr) && expr[i] != q; i++ {
					if expr[i] == '\\' {
						i++
					}
				}
				if i >= len(expr) {
					return 0, fmt.Errorf("unterminated string in %q", expr)
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %q in %q", close, expr)
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{' || c == '[':
			j, err := skipTo(i+1, closing[c])
			if err != nil {
				return nil, err
			}
			i = j
		case c == '(':
			stack = append(stack, ")")
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ')' in %q", expr)
			}
			stack = stack[:len(stack)-1]
			i++
		case c == '"' || c == '\'' || c == '`':
			j, err := skipTo(i+1, c)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				j, err := skipTo(i+1, '}')
				if err != nil {
					return nil, err
				}
				i = j
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			call := k < len(expr) && expr[k] == '('
			switch {
			case labelLists[word] && call:
				end, err := skipTo(k+1, ')')
				if err != nil {
					return nil, err
				}
				j = end
			case keywords[strings.ToLower(word)], call, aggregations[word]:
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unbalanced '(' in %q", expr)
	}
	return names, nil
}

func TestPromQLMetrics(t *testing.T) {
	tests := []struct {
		expr string
		want string
		err  bool
	}{
		{`histogram_quantile(0.9, sum by (le, function) (rate(a_bucket{job=~"$job"}[$__rate_interval])))`, "a_bucket", false},
		{`time() - max by (activity) (b{x="(("})`, "b", false},
		{`sum(c) by (reason) / on(reason) group_left d offset 5m > 0`, "c,d", false},
		{`sum(f`, "", true},
		{`g{x="y}`, "", true},
	}
	for _, tc := range tests {
		got, err := promQLMetrics(tc.expr)
		if (err != nil) != tc.err || strings.Join(got, ",") != tc.want {
			t.Errorf("promQLMetrics(%q) = %v, %v; want %q (error %v)", tc.expr, got, err, tc.want, tc.err)
		}
	}
}

// Every series the shipped Grafana dashboard queries is one draxr serves.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	families := exported(t)
	body, err := os.ReadFile(filepath.Join("..", "..", "charts", "draxr", "dashboards", "draxr-autoscaler.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(body, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	type query struct{ where, expr string }
	var queries []query
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			queries = append(queries, query{"panel " + p.Title, tg.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		s, _ := q["query"].(string)
		if m := labelValues.FindStringSubmatch(s); m != nil {
			queries = append(queries, query{"variable " + v.Name, m[1]})
		}
	}
	if len(queries) < 20 {
		t.Fatalf("found %d queries in the dashboard; is it read right?", len(queries))
	}
	used := map[string]bool{}
	for _, q := range queries {
		if q.expr == "" {
			t.Errorf("%s: empty query", q.where)
			continue
		}
		names, err := promQLMetrics(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q.where, q.expr)
		}
		for _, n := range names {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if f := families[strings.TrimSuffix(n, suffix)]; f != nil && strings.HasSuffix(n, suffix) &&
					(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
					base = strings.TrimSuffix(n, suffix)
				}
			}
			if families[base] == nil {
				t.Errorf("%s: %q queries %s, which draxr does not export", q.where, q.expr, n)
			}
			used[base] = true
		}
	}
	// The dashboard covers what the issue asks for.
	for _, want := range []string{"cluster_autoscaler_node_group_target_count", "cluster_autoscaler_unschedulable_pods_count",
		"cluster_autoscaler_scaled_up_nodes_total", "cluster_autoscaler_failed_scale_ups_total",
		"draxr_autoscaler_planned_devices_total", "draxr_autoscaler_devices_in_use"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// docs/metrics.md lists every metric draxr serves and no other.
func TestMetricsDoc(t *testing.T) {
	families := exported(t)
	body, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:cluster|draxr)_autoscaler_[a-z_]+)`").FindAllStringSubmatch(string(body), -1) {
		documented[m[1]] = true
	}
	for name := range families {
		if !documented[name] {
			t.Errorf("docs/metrics.md has no row for %s", name)
		}
	}
	for name := range documented {
		if families[name] == nil {
			t.Errorf("docs/metrics.md lists %s, which draxr does not serve", name)
		}
	}
}
