package snapshot

import (
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

func taintRule(name string, sel *resourceapi.DeviceTaintSelector) *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: sel,
			Taint: resourceapi.DeviceTaint{Key: "example.com/" + name, Effect: resourceapi.DeviceTaintEffectNoSchedule}},
	}
}

// taintedDevices lists "node/device=key,key" for every tainted device the
// allocator sees.
func taintedDevices(s *Snapshot) []string {
	var out []string
	list, _ := sliceLister{s}.ListWithDeviceTaintRules()
	for _, sl := range list {
		for _, d := range sl.Spec.Devices {
			if len(d.Taints) == 0 {
				continue
			}
			var keys []string
			for _, t := range d.Taints {
				keys = append(keys, t.Key)
			}
			out = append(out, *sl.Spec.NodeName+"/"+d.Name+"="+strings.Join(keys, ","))
		}
	}
	slices.Sort(out)
	return out
}

// The rules taint the devices their selector picks (driver, pool, device;
// each unset field matches all), in slices added before a new node's and
// after alike; a rule without a selector taints nothing; the slices given
// are not changed.
func TestDeviceTaintRules(t *testing.T) {
	s := New()
	s.SetDeviceTaintRules([]*resourceapi.DeviceTaintRule{
		taintRule("pool", &resourceapi.DeviceTaintSelector{Driver: ptr.To(fx.Driver), Pool: ptr.To("node-a")}),
		taintRule("device", &resourceapi.DeviceTaintSelector{Device: ptr.To("gpu-1")}),
		taintRule("other-driver", &resourceapi.DeviceTaintSelector{Driver: ptr.To("nic.example.com")}),
		taintRule("none", nil),
	})
	a, b := fx.GPUSlice("node-a", 2), fx.GPUSlice("node-b", 2)
	for _, sl := range []*resourceapi.ResourceSlice{a, b} {
		if err := s.AddResourceSlice(sl); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"node-a/gpu-0=example.com/pool", "node-a/gpu-1=example.com/pool,example.com/device", "node-b/gpu-1=example.com/device"}
	if got := taintedDevices(s); !slices.Equal(got, want) {
		t.Errorf("tainted devices = %v, want %v", got, want)
	}
	if len(a.Spec.Devices[0].Taints) != 0 {
		t.Error("the caller's slice was changed")
	}
	s.Fork()
	if err := s.AddResourceSlice(fx.GPUSlice("node-new", 2)); err != nil {
		t.Fatal(err)
	}
	if got := taintedDevices(s); !slices.Contains(got, "node-new/gpu-1=example.com/device") || slices.Contains(got, "node-new/gpu-0=example.com/pool") {
		t.Errorf("a new node's slice: tainted devices = %v, want its gpu-1 only", got)
	}
	s.Revert()
	if got := taintedDevices(s); !slices.Equal(got, want) {
		t.Errorf("after Revert: %v, want %v", got, want)
	}
}

// With DRADeviceTaintRules off the scheduler's tracker ignores the rules.
func TestDeviceTaintRulesGateOff(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaintRules, false)
	s := New()
	s.SetDeviceTaintRules([]*resourceapi.DeviceTaintRule{taintRule("all", &resourceapi.DeviceTaintSelector{})})
	if err := s.AddResourceSlice(fx.GPUSlice("node-a", 2)); err != nil {
		t.Fatal(err)
	}
	if got := taintedDevices(s); len(got) != 0 {
		t.Errorf("tainted devices = %v, want none with the gate off", got)
	}
}
