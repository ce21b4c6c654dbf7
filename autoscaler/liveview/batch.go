package liveview

import (
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	prinformers "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/informers/externalversions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/view"
)

// batchInformers registers, on a View read for a plan (Read, Watch), the
// informers of the CRDs the API server serves: Volcano's PodGroups, CA's
// ProvisioningRequests and CapacityBuffers (JSON only, as CRDs are
// served). It returns what starts them and waits for their caches, and
// their informers (to watch for changes).
func batchInformers(v view.View, cfg *rest.Config, disco discovery.DiscoveryInterface, f informers.SharedInformerFactory) (
	view.View, []startable, map[string]cache.SharedIndexInformer, error) {
	volcano := CheckServed(disco, view.VolcanoPodGroupsResource()) == nil
	requests := CheckServed(disco, prv1.SchemeGroupVersion.WithResource("provisioningrequests")) == nil
	buffers := CheckServed(disco, capacitybuffer.GroupVersionResource()) == nil
	watched := map[string]cache.SharedIndexInformer{}
	if !volcano && !requests && !buffers {
		return v, nil, watched, nil
	}
	jsonCfg := JSONOnly(cfg)
	var started []startable
	if volcano || buffers {
		dyn, err := dynamic.NewForConfig(jsonCfg)
		if err != nil {
			return v, nil, nil, err
		}
		df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		if volcano {
			v = WithVolcanoPodGroups(v, df)
			watched["podgroups.scheduling.volcano.sh"] = df.ForResource(view.VolcanoPodGroupsResource()).Informer()
		}
		if buffers {
			// Not WithCapacityBuffers: a plan reads buffers, their
			// templates and quotas as input.Objects holds them, not the
			// workloads a running loop resolves scalableRefs with.
			v.CapacityBuffers = df.ForResource(capacitybuffer.GroupVersionResource()).Lister()
			v.PodTemplates = f.Core().V1().PodTemplates().Lister()
			v.ResourceQuotas = f.Core().V1().ResourceQuotas().Lister()
			watched["capacitybuffers"] = df.ForResource(capacitybuffer.GroupVersionResource()).Informer()
			watched["resourcequotas"] = f.Core().V1().ResourceQuotas().Informer()
		}
		started = append(started, startable{df.Start, func(stop <-chan struct{}) bool { return allSynced(df.WaitForCacheSync(stop)) }})
	}
	if requests {
		prc, err := prclient.NewForConfig(jsonCfg)
		if err != nil {
			return v, nil, nil, err
		}
		pf := prinformers.NewSharedInformerFactory(prc, 0)
		v = WithProvisioningRequests(v, pf, f)
		watched["provisioningrequests"] = pf.Autoscaling().V1().ProvisioningRequests().Informer()
		started = append(started, startable{pf.Start, func(stop <-chan struct{}) bool { return allSynced(pf.WaitForCacheSync(stop)) }})
	}
	if v.PodTemplates != nil {
		watched["podtemplates"] = f.Core().V1().PodTemplates().Informer()
	}
	return v, started, watched, nil
}

// startable is an informer factory other than client-go's.
type startable struct {
	start func(stop <-chan struct{})
	sync  func(stop <-chan struct{}) bool
}

func allSynced[K comparable](synced map[K]bool) bool {
	for _, ok := range synced {
		if !ok {
			return false
		}
	}
	return true
}
