package limits

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultMaxNodesPerScaleUp is CA's --max-nodes-per-scaleup default.
const DefaultMaxNodesPerScaleUp = 1000

// Options are what the flags set, for the planner.
type Options struct {
	Limits Limits
	// MaxNodesPerScaleUp caps the nodes one scale-up adds, balanced
	// groups together; 0 means no cap.
	MaxNodesPerScaleUp int
	Balancing          Balancing
}

// Balancing is --balance-similar-node-groups and its labels.
type Balancing struct {
	Enabled bool
	// IgnoreLabels are labels, besides CA's basic set and draxr's group
	// label, whose values may differ between similar groups.
	IgnoreLabels []string
	// Labels, when set, are the only thing compared: groups are similar
	// when these labels have the same values.
	Labels []string
}

// Flags are the flags, as CA names them; draxr-autoscaler and draxr
// simulate both add them.
type Flags struct {
	coresTotal, memoryTotal string
	gpuTotal                []string
	maxNodesPerScaleUp      int
	balance                 bool
	ignoreLabels, labels    []string
}

// AddFlags adds the flags with CA's defaults.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.coresTotal, "cores-total", fmt.Sprintf("0:%d", DefaultMaxCores),
		"minimum and maximum number of cores in the cluster, <min>:<max>: scale-up stops at the maximum, scale-down at the minimum (a maximum of 0 means none)")
	fs.StringVar(&f.memoryTotal, "memory-total", fmt.Sprintf("0:%d", DefaultMaxMemoryGiB),
		"minimum and maximum memory in the cluster in GiB, <min>:<max>, counted from the nodes' capacity (a maximum of 0 means none)")
	fs.StringArrayVar(&f.gpuTotal, "gpu-total", nil,
		"minimum and maximum number of GPUs of a type in the cluster, <gpu_type>:<min>:<max>, repeatable; the type is an extended resource name "+
			"(nvidia.com/gpu, or deviceclass.resource.kubernetes.io/<class>) and a node counts what it offers under that name, by device plugin or as DRA devices")
	fs.IntVar(&f.maxNodesPerScaleUp, "max-nodes-per-scaleup", DefaultMaxNodesPerScaleUp,
		"most nodes one scale-up adds (balanced groups together); pods it leaves wait for the next loop")
	fs.BoolVar(&f.balance, "balance-similar-node-groups", false,
		"split a scale-up across node groups similar to the chosen one (same capacity and allocatable within CA's tolerances, same labels, same template ResourceSlices devices), balancing their sizes")
	fs.StringArrayVar(&f.ignoreLabels, "balancing-ignore-label", nil,
		"a label whose value may differ between similar node groups, besides CA's basic set and draxr.dev/node-group; repeatable")
	fs.StringArrayVar(&f.labels, "balancing-label", nil,
		"a label to compare node groups by instead of the built-in comparison; repeatable; cannot be combined with --balancing-ignore-label")
}

// Options parses and checks the flags; errors name the flag and value.
func (f *Flags) Options() (Options, error) {
	var o Options
	var err error
	if o.Limits.Cores, err = ParseRange("--cores-total", f.coresTotal); err != nil {
		return Options{}, err
	}
	mem, err := ParseRange("--memory-total", f.memoryTotal)
	if err != nil {
		return Options{}, err
	}
	const maxGiB = int64(1<<63-1) / GiB
	if mem.Max > maxGiB {
		return Options{}, fmt.Errorf("--memory-total %q: at most %d GiB", f.memoryTotal, maxGiB)
	}
	o.Limits.Memory = Range{Min: mem.Min * GiB, Max: mem.Max * GiB}
	seen := map[v1.ResourceName]bool{}
	for _, s := range f.gpuTotal {
		g, err := ParseGPU(s)
		if err != nil {
			return Options{}, err
		}
		if seen[g.Type] {
			return Options{}, fmt.Errorf("--gpu-total %q: GPU type %s is given twice", s, g.Type)
		}
		seen[g.Type] = true
		o.Limits.GPUs = append(o.Limits.GPUs, g)
	}
	if f.maxNodesPerScaleUp < 1 {
		return Options{}, fmt.Errorf("--max-nodes-per-scaleup must be >= 1, got %d", f.maxNodesPerScaleUp)
	}
	o.MaxNodesPerScaleUp = f.maxNodesPerScaleUp
	if len(f.labels) > 0 && len(f.ignoreLabels) > 0 {
		return Options{}, fmt.Errorf("--balancing-label cannot be combined with --balancing-ignore-label: the labels given replace the whole comparison")
	}
	for _, l := range append(append([]string(nil), f.labels...), f.ignoreLabels...) {
		if errs := validation.IsQualifiedName(l); len(errs) > 0 {
			return Options{}, fmt.Errorf("balancing label %q is not a label key: %s", l, strings.Join(errs, "; "))
		}
	}
	o.Balancing = Balancing{Enabled: f.balance, IgnoreLabels: f.ignoreLabels, Labels: f.labels}
	return o, nil
}

// ParseRange reads <min>:<max>, whole numbers with 0 <= min <= max, as CA
// does; 0:0 limits nothing (a max of 0 means no maximum).
func ParseRange(flag, s string) (Range, error) {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return Range{}, fmt.Errorf("%s %q: want <min>:<max>", flag, s)
	}
	var r Range
	var err error
	if r.Min, err = strconv.ParseInt(lo, 10, 64); err != nil {
		return Range{}, fmt.Errorf("%s %q: min %q is not a whole number", flag, s, lo)
	}
	if r.Max, err = strconv.ParseInt(hi, 10, 64); err != nil {
		return Range{}, fmt.Errorf("%s %q: max %q is not a whole number", flag, s, hi)
	}
	return r, r.check(flag, s)
}

func (r Range) check(flag, s string) error {
	switch {
	case r.Min < 0:
		return fmt.Errorf("%s %q: min must be >= 0", flag, s)
	case r.Max < 0:
		return fmt.Errorf("%s %q: max must be >= 0", flag, s)
	case r.Max < r.Min:
		return fmt.Errorf("%s %q: max must be >= min", flag, s)
	}
	return nil
}

// ParseGPU reads <gpu_type>:<min>:<max>. The type must be an extended
// resource name such as nvidia.com/gpu or
// deviceclass.resource.kubernetes.io/<class>: draxr counts GPUs by the
// name pods request, not by a cloud's accelerator label (where CA's flag
// works only on GKE).
func ParseGPU(s string) (GPULimit, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return GPULimit{}, fmt.Errorf("--gpu-total %q: want <gpu_type>:<min>:<max>", s)
	}
	name := parts[0]
	if !strings.Contains(name, "/") || len(validation.IsQualifiedName(name)) > 0 {
		return GPULimit{}, fmt.Errorf("--gpu-total %q: GPU type %q must be an extended resource name such as nvidia.com/gpu or "+
			"deviceclass.resource.kubernetes.io/<class>; draxr counts GPUs by the resource name, not by a cloud's accelerator label", s, name)
	}
	r, err := ParseRange("--gpu-total", parts[1]+":"+parts[2])
	if err != nil {
		return GPULimit{}, fmt.Errorf("--gpu-total %q: %w", s, unwrapFlag(err))
	}
	return GPULimit{Type: v1.ResourceName(name), Range: r}, nil
}

// unwrapFlag drops the flag and value prefix of a ParseRange error, which
// the caller repeats with the whole value.
func unwrapFlag(err error) error {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, ": "); ok {
		return fmt.Errorf("%s", rest)
	}
	return err
}
