//go:build schedulerperf

package schedulerperf

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// schedulerCode are the packages whose CPU counts as the scheduler's: the
// scheduler itself (framework, plugins, queue, cache) and draxr's
// wrappers. A sample counts when any frame of its stack is in them, so
// what they call (the structured allocator, client-go) counts too.
var schedulerCode = []string{"k8s.io/kubernetes/pkg/scheduler", "draxr.dev/draxr/scheduler"}

// cpuWindow profiles the whole process's CPU from start to stop. Throughput
// on a shared 2-core machine moves with everything else that runs; the
// CPU the scheduler's own code burns for the same pods does not, so it is
// the steadier comparison of the two registries.
type cpuWindow struct {
	buf bytes.Buffer
	on  bool
}

// startCPU starts the window. It is off when the process is profiled
// already (go test -cpuprofile): the figures are then not reported.
func startCPU() *cpuWindow {
	w := &cpuWindow{}
	w.on = pprof.StartCPUProfile(&w.buf) == nil
	return w
}

// stop ends the window and returns the CPU time sampled in scheduler code
// and in the whole process, or ok false when there was no window.
func (w *cpuWindow) stop() (scheduler, total time.Duration, ok bool, err error) {
	if !w.on {
		return 0, 0, false, nil
	}
	pprof.StopCPUProfile()
	p, err := profile.Parse(&w.buf)
	if err != nil {
		return 0, 0, false, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return 0, 0, false, nil
	}
	for _, s := range p.Sample {
		d := time.Duration(s.Value[idx])
		total += d
		if inSchedulerCode(s) {
			scheduler += d
		}
	}
	return scheduler, total, true, nil
}

func inSchedulerCode(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, prefix := range schedulerCode {
				if strings.HasPrefix(line.Function.Name, prefix) {
					return true
				}
			}
		}
	}
	return false
}
