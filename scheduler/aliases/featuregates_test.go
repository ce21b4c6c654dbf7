package aliases_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"draxr.dev/draxr/scheduler/aliases"
	fx "draxr.dev/draxr/simulator/fixtures"
)

// kube-scheduler builds the registry of out-of-tree plugins before it
// parses --feature-gates; the aliases must still run with the gates as
// parsed. With DRAExtendedResource turned off after the registry was
// made, a pod asking for a DRA-backed extended resource must be refused
// exactly as the upstream plugins (built after the change) refuse it.
func TestAliasesHonourFeatureGatesSetAfterRegistry(t *testing.T) {
	registerMetrics.Do(schedmetrics.Register)
	early := aliases.Registry(nil, &aliases.DeviceFull{}) // as app.WithPlugin does, before flags
	// DRAExtendedResource is GA and locked on in v1.37; a 1.36 emulation
	// (kube-scheduler's --emulated-version) may still turn it off.
	featuregatetesting.SetFeatureGateEmulationVersionDuringTest(t, utilfeature.DefaultFeatureGate, version.MustParse("1.36"))
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAExtendedResource, false)

	pod := fx.Pod("gpu2", 500, fx.GPUs(fx.GPUResource, 2))
	var results [2]string
	for i, useAliases := range []bool{false, true} {
		snap := cluster(t)
		registry := plugins.NewInTreeRegistry()
		if err := registry.Merge(early); err != nil {
			t.Fatal(err)
		}
		fw, err := frameworkruntime.NewFramework(context.Background(), registry, profile(t, useAliases, ""),
			frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(nil, 0)),
			frameworkruntime.WithSnapshotSharedLister(snap),
			frameworkruntime.WithSharedDRAManager(snap),
			frameworkruntime.WithLogger(klog.Background().V(5)))
		if err != nil {
			t.Fatal(err)
		}
		results[i] = schedule(t, fw, snap, pod.DeepCopy())
	}
	if results[0] != results[1] {
		t.Errorf("with DRAExtendedResource off, upstream plugins:\n%s\naliases:\n%s", results[0], results[1])
	}
}
