package devicepools

import (
	"reflect"
	"strconv"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// Each device whose counter consumption its pool cannot satisfy is named
// with the field to fix; a pool that is consistent has no problem.
func TestCounterProblems(t *testing.T) {
	declared := resourceapi.ResourceSliceSpec{Driver: gpuDriver, SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0-set", Counters: counters(8)}}}
	devices := func(ds ...resourceapi.Device) resourceapi.ResourceSliceSpec {
		return resourceapi.ResourceSliceSpec{Driver: gpuDriver, Devices: ds}
	}
	tests := []struct {
		name  string
		specs []resourceapi.ResourceSliceSpec
		want  []string // slice index, device, field of each problem
	}{
		{name: "consistent, sets in another slice", specs: []resourceapi.ResourceSliceSpec{declared, devices(partition("half", "gpu-0-set", 4, ""))}},
		{name: "undeclared set", specs: []resourceapi.ResourceSliceSpec{declared, devices(partition("x", "gpu-9-set", 4, ""))},
			want: []string{"1 x devices[0].consumesCounters[0].counterSet"}},
		{name: "undeclared counter", specs: []resourceapi.ResourceSliceSpec{declared, devices(resourceapi.Device{Name: "x",
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0-set", Counters: map[string]resourceapi.Counter{"cores": counters(1)["memory"]}}}})},
			want: []string{"1 x devices[0].consumesCounters[0].counters[cores]"}},
		{name: "more than the set holds", specs: []resourceapi.ResourceSliceSpec{declared, devices(partition("ok", "gpu-0-set", 8, ""), partition("big", "gpu-0-set", 9, ""))},
			want: []string{"1 big devices[1].consumesCounters[0].counters[memory]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := problemFields(CounterProblems(tt.specs)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

// A template's slices are one pool per driver on a new node: a set one
// driver declares does not serve another driver's devices, and each
// problem names its slice among all the template's.
func TestTemplateCounterProblems(t *testing.T) {
	specs := []resourceapi.ResourceSliceSpec{
		{Driver: gpuDriver, SharedCounters: []resourceapi.CounterSet{{Name: "set", Counters: counters(8)}}},
		{Driver: nicDriver, Devices: []resourceapi.Device{partition("nic", "set", 1, "")}},
		{Driver: gpuDriver, Devices: []resourceapi.Device{partition("gpu", "set", 8, "")}},
	}
	want := []string{"1 nic devices[0].consumesCounters[0].counterSet"}
	if got := problemFields(TemplateCounterProblems(specs)); !reflect.DeepEqual(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

func problemFields(ps []CounterProblem) []string {
	var out []string
	for _, p := range ps {
		if p.Message == "" || p.Fix == "" {
			out = append(out, "no message or fix for "+p.Device)
		}
		out = append(out, strconv.Itoa(p.Slice)+" "+p.Device+" "+p.Field)
	}
	return out
}
