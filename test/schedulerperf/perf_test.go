//go:build schedulerperf

package schedulerperf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/dynamic-resource-allocation/structured"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/scheduler/devicefull"
	"draxr.dev/draxr/scheduler/plugins"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// workload is one of upstream's DRA extended-resource workloads: its
// config file (relative to scheduler_perf), test case, and the prefix of
// its workload names before the size (1.37 puts the class variants in one
// test case as Explicit_25classes_2000pods_200nodes and so on). name is
// what the output and SCHEDULER_PERF_WORKLOADS call it.
type workload struct {
	name, config, testCase, prefix string
}

// workloads are upstream's DRA extended-resource cases that have 2000- and
// 5000-pod workloads.
func workloads() []workload {
	const er = "dra/extendedresource/performance-config.yaml"
	return []workload{
		{"ExtendedResource_25Classes", er, "ExtendedResource", "Explicit_25classes_"},
		{"ExtendedResource_50Classes", er, "ExtendedResource", "Explicit_50classes_"},
		{"ImplicitExtendedResource_25Classes", er, "ExtendedResource", "Implicit_25classes_"},
		{"ExtendedResourceScoring", "dra/extendedresource/scoring/performance-config.yaml", "ExtendedResourceScoring", ""},
	}
}

// run is one workload run with one registry.
type run struct {
	throughput       float64 // median of the workload's samples, pods/s
	scheduled, total int
	// schedulerCPU is the CPU sampled in scheduler code over the run, and
	// processCPU all the process's (the API server runs in it); hasCPU is
	// false when the process was profiled already.
	schedulerCPU, processCPU time.Duration
	hasCPU                   bool
}

// cpuPerPod is the run's scheduler CPU per pod.
func (r run) cpuPerPod() time.Duration {
	if r.total == 0 {
		return 0
	}
	return r.schedulerCPU / time.Duration(r.total)
}

// relativeCPU is the scheduler's CPU over the rest of the process's in the
// same run (the API server serving the same requests for both registries).
// This VM's speed drifts by a third over minutes and every CPU figure of a
// run moves with it; the quotient does not.
func (r run) relativeCPU() float64 {
	rest := r.processCPU - r.schedulerCPU
	if rest <= 0 {
		return 0
	}
	return float64(r.schedulerCPU) / float64(rest)
}

// BenchmarkSchedulerPerf runs each workload with the stock registry and
// draxr-scheduler's, alternating which goes first, and prints one line
// per workload:
//
//	scheduler-perf <workload> stock=<pods/s> draxr=<pods/s> ratio=<r> scheduled=<n>/<n>
//
// and, from a CPU profile of each run, the CPU the scheduler's code took
// per pod (median of the runs) and the median over the pairs of
// stock/draxr of the scheduler's CPU relative to the rest of the process
// (see relativeCPU), oriented as throughput's ratio (>= 1: draxr costs no
// more):
//
//	scheduler-perf-cpu <workload> stock=<ms>/pod draxr=<ms>/pod relative-ratio=<r>
//
// Throughput is upstream's SchedulingThroughput Perc50 (the median of the
// 1-second samples of the measured pods), then the median over the runs;
// scheduled counts the pods bound at the end of the run with the fewest.
// Environment: SCHEDULER_PERF_SET (2000 or 5000 pods), SCHEDULER_PERF_REPEAT
// (runs per registry), SCHEDULER_PERF_WORKLOADS (comma-separated names,
// default all), SCHEDULER_PERF_AA=1 (stock against itself).
func BenchmarkSchedulerPerf(b *testing.B) {
	if testing.Short() {
		b.Skip("takes many minutes: make scheduler-perf")
	}
	set := envOr("SCHEDULER_PERF_SET", "2000")
	size := map[string]string{"2000": "2000pods_200nodes", "5000": "5000pods_500nodes"}[set]
	if size == "" {
		b.Fatalf("SCHEDULER_PERF_SET=%q: want 2000 or 5000", set)
	}
	repeat, err := strconv.Atoi(envOr("SCHEDULER_PERF_REPEAT", "3"))
	if err != nil || repeat < 1 {
		b.Fatalf("SCHEDULER_PERF_REPEAT=%q: want a positive number", os.Getenv("SCHEDULER_PERF_REPEAT"))
	}
	var only []string
	if v := os.Getenv("SCHEDULER_PERF_WORKLOADS"); v != "" {
		only = strings.Split(v, ",")
	}
	if stockAgainstItself() {
		fmt.Println("scheduler-perf: SCHEDULER_PERF_AA=1: the stock registry runs in draxr's place too; draxr= is stock again")
	}
	upstream := upstreamDir(b)
	deployPlugins := deployPlugins(b)
	// Every workload of the generated configs runs; they carry no labels.
	perf.PerfSchedulingLabelFilter = ""
	// As upstream's BenchmarkPerfScheduling for these workloads.
	structured.EnableAllocators("experimental")
	defer structured.EnableAllocators()

	work := b.TempDir()
	seq := 0
	for _, w := range workloads() {
		if only != nil && !slices.Contains(only, w.name) {
			continue
		}
		runs := map[string][]run{}
		var ratios []string
		var cpuRatios []float64
		for rep := 0; rep < repeat; rep++ {
			order := []string{"stock", "draxr"}
			if rep%2 == 1 {
				order = []string{"draxr", "stock"}
			}
			pair := map[string]float64{}
			cpuPair := map[string]float64{}
			for _, reg := range order {
				seq++
				cfg := writeConfig(b, upstream, w, size, reg, deployPlugins, filepath.Join(work, fmt.Sprintf("run-%d", seq)))
				r := runWorkload(b, cfg, reg, filepath.Join(work, fmt.Sprintf("data-%d", seq)))
				runs[reg] = append(runs[reg], r)
				pair[reg] = r.throughput
				fmt.Printf("scheduler-perf-run %s/%s %s rep=%d throughput=%.1f scheduled=%d/%d scheduler-cpu=%s process-cpu=%s load=%s\n",
					w.name, size, reg, rep+1, r.throughput, r.scheduled, r.total,
					r.schedulerCPU.Round(time.Millisecond), r.processCPU.Round(time.Millisecond), loadAverage())
				if r.hasCPU {
					cpuPair[reg] = r.relativeCPU()
				}
			}
			ratios = append(ratios, fmt.Sprintf("%.3f", pair["draxr"]/pair["stock"]))
			if cpuPair["draxr"] > 0 && cpuPair["stock"] > 0 {
				cpuRatios = append(cpuRatios, cpuPair["stock"]/cpuPair["draxr"])
			}
		}
		stock, draxr := medianOf(runs["stock"], throughputOf), medianOf(runs["draxr"], throughputOf)
		scheduled, total := fewestScheduled(append(runs["stock"], runs["draxr"]...))
		fmt.Printf("scheduler-perf-pairs %s/%s draxr/stock per pair (first of each pair alternates, stock first): %s\n",
			w.name, size, strings.Join(ratios, " "))
		fmt.Printf("scheduler-perf %s/%s stock=%.1f draxr=%.1f ratio=%.3f scheduled=%d/%d\n",
			w.name, size, stock, draxr, draxr/stock, scheduled, total)
		if len(cpuRatios) == repeat {
			var each []string
			for _, r := range cpuRatios {
				each = append(each, fmt.Sprintf("%.3f", r))
			}
			fmt.Printf("scheduler-perf-cpu-pairs %s/%s stock/draxr of scheduler CPU relative to the rest, per pair: %s\n",
				w.name, size, strings.Join(each, " "))
			fmt.Printf("scheduler-perf-cpu %s/%s stock=%.2fms/pod draxr=%.2fms/pod relative-ratio=%.3f\n", w.name, size,
				ms(medianOf(runs["stock"], run.cpuPerPod)), ms(medianOf(runs["draxr"], run.cpuPerPod)), middle(cpuRatios))
		}
	}
}

// runWorkload runs one generated config (one test case, one workload) and
// returns its throughput and how many pods were bound at the end.
func runWorkload(b *testing.B, config, registryName, dataDir string) run {
	if err := flag.Set("data-items-dir", dataDir); err != nil {
		b.Fatal(err)
	}
	var registry frameworkruntime.Registry
	if registryName == "draxr" && !stockAgainstItself() {
		registry = aliases.Registry(plugins.NewResolvers().WithResolver, &aliases.DeviceFull{MinSlices: devicefull.DefaultMinSlices})
	}
	var r run
	count := perf.WithPrepareFn(func(tCtx ktesting.TContext) error {
		client := tCtx.Client()
		// Registered after the API server's cleanup, so it runs first,
		// when the workload is done and the server still answers.
		tCtx.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				tCtx.Errorf("count scheduled pods: %v", err)
				return
			}
			r.total = len(pods.Items)
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" {
					r.scheduled++
				}
			}
		})
		return nil
	})
	cpu := startCPU()
	perf.RunBenchmarkPerfScheduling(b, config, "draxr_"+registryName, registry, count)
	var err error
	if r.schedulerCPU, r.processCPU, r.hasCPU, err = cpu.stop(); err != nil {
		b.Fatalf("CPU profile of the %s run: %v", registryName, err)
	}
	r.throughput = readThroughput(b, dataDir)
	return r
}

// readThroughput reads SchedulingThroughput Perc50 from the data items
// scheduler_perf wrote.
func readThroughput(b *testing.B, dir string) float64 {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		b.Fatalf("data items in %s: %v (%v), want one file", dir, files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		b.Fatal(err)
	}
	var items struct {
		DataItems []struct {
			Data   map[string]float64 `json:"data"`
			Labels map[string]string  `json:"labels"`
		} `json:"dataItems"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		b.Fatalf("%s: %v", files[0], err)
	}
	for _, it := range items.DataItems {
		if it.Labels["Metric"] == "SchedulingThroughput" {
			return it.Data["Perc50"]
		}
	}
	b.Fatalf("%s: no SchedulingThroughput", files[0])
	return 0
}

// writeConfig writes a scheduler_perf config with only workload w's test
// case and its size workload, labels dropped, every path absolute
// (scheduler_perf reads them relative to the working directory), and for
// draxr a scheduler configuration with the shipped profile's plugins.
func writeConfig(b *testing.B, upstream string, w workload, size, registryName string, deployPlugins any, prefix string) string {
	src := filepath.Join(upstream, w.config)
	var cases []map[string]any
	readYAML(b, src, &cases)
	var tc map[string]any
	for _, c := range cases {
		if c["name"] == w.testCase {
			tc = c
		}
	}
	if tc == nil {
		b.Fatalf("%s: no test case %s", src, w.testCase)
	}
	var kept []any
	for _, wl := range tc["workloads"].([]any) {
		if m := wl.(map[string]any); m["name"] == w.prefix+size {
			delete(m, "labels")
			kept = append(kept, m)
		}
	}
	if len(kept) != 1 {
		b.Fatalf("%s: test case %s has no workload %s", src, w.testCase, w.prefix+size)
	}
	tc["workloads"] = kept
	delete(tc, "labels")
	// Only SchedulingThroughput is read (it has its own collector). The
	// default histograms are gathered from the whole metrics registry,
	// API server included, which took minutes per workload on a loaded
	// 2-core machine.
	tc["metricsCollectorConfig"] = map[string]any{"metrics": map[string]any{}}
	absPaths(tc, filepath.Dir(src))
	if registryName == "draxr" && !stockAgainstItself() {
		tc["schedulerConfigPath"] = writeDraxrSchedulerConfig(b, tc["schedulerConfigPath"], deployPlugins, prefix+"-scheduler-config.yaml")
	}
	path := prefix + ".yaml"
	writeYAML(b, path, []any{tc})
	return path
}

// writeDraxrSchedulerConfig is the stock configuration of the test case
// (upstream's default when it names none) with the shipped profile's
// plugins (scheduler/deploy/scheduler-config.yaml: the draxr plugins
// enabled, the upstream three disabled) and the same plugin arguments under
// the draxr names, so only the plugins differ.
func writeDraxrSchedulerConfig(b *testing.B, stockPath any, deployPlugins any, path string) string {
	cfg := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   []any{map[string]any{"schedulerName": "default-scheduler"}},
	}
	if p, ok := stockPath.(string); ok && p != "" {
		readYAML(b, p, &cfg)
	}
	renamed := aliases.Names()
	for _, prof := range cfg["profiles"].([]any) {
		pm := prof.(map[string]any)
		pm["plugins"] = deployPlugins
		pcs, _ := pm["pluginConfig"].([]any)
		for _, pc := range pcs {
			m := pc.(map[string]any)
			for upstreamName, draxrName := range renamed {
				if m["name"] == upstreamName {
					m["name"] = draxrName
				}
			}
		}
	}
	writeYAML(b, path, cfg)
	return path
}

// absPaths makes every "...Path" string under v absolute, relative to dir.
func absPaths(v any, dir string) {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if s, ok := val.(string); ok && strings.HasSuffix(k, "Path") && s != "" && !filepath.IsAbs(s) {
				t[k] = filepath.Join(dir, s)
				continue
			}
			absPaths(val, dir)
		}
	case []any:
		for _, it := range t {
			absPaths(it, dir)
		}
	}
}

// deployPlugins is the plugins section of the shipped configuration's
// first profile.
func deployPlugins(b *testing.B) any {
	var cfg struct {
		Profiles []map[string]any `json:"profiles"`
	}
	// SCHEDULER_PERF_DRAXR_CONFIG names another scheduler configuration
	// whose plugins section to measure (another plugin order, say).
	path := envOr("SCHEDULER_PERF_DRAXR_CONFIG", filepath.Join("..", "..", "scheduler", "deploy", "scheduler-config.yaml"))
	readYAML(b, path, &cfg)
	if len(cfg.Profiles) == 0 || cfg.Profiles[0]["plugins"] == nil {
		b.Fatalf("%s: no profile with plugins", path)
	}
	return cfg.Profiles[0]["plugins"]
}

// upstreamDir is scheduler_perf in the module cache.
func upstreamDir(b *testing.B) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		b.Fatalf("go list -m k8s.io/kubernetes: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf")
}

func readYAML(b *testing.B, path string, into any) {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
}

func writeYAML(b *testing.B, path string, v any) {
	raw, err := yaml.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
}

// medianOf is the median of one figure of the runs.
func medianOf[T float64 | time.Duration](runs []run, figure func(run) T) T {
	v := make([]T, len(runs))
	for i, r := range runs {
		v[i] = figure(r)
	}
	return middle(v)
}

func throughputOf(r run) float64 { return r.throughput }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// middle is the median of v (sorted in place).
func middle[T float64 | time.Duration](v []T) T {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func fewestScheduled(runs []run) (int, int) {
	best := runs[0]
	for _, r := range runs[1:] {
		if r.scheduled < best.scheduled {
			best = r
		}
	}
	return best.scheduled, best.total
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], ",")
}

// stockAgainstItself runs the stock registry in draxr's place too
// (SCHEDULER_PERF_AA=1): the pair ratios it prints are the method's own
// spread, which a difference between the registries has to exceed.
func stockAgainstItself() bool { return os.Getenv("SCHEDULER_PERF_AA") == "1" }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
