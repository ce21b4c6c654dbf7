package view

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
)

// addBatch adds the batch kinds the View reads (ProvisioningRequests,
// CapacityBuffers, the PodTemplates they name, ResourceQuotas), sorted.
func (v View) addBatch(objs *input.Objects) error {
	all := labels.Everything()
	var err error
	if v.ProvisioningRequests != nil {
		if objs.ProvisioningRequests, err = v.ProvisioningRequests.List(all); err != nil {
			return fmt.Errorf("list provisioningrequests: %w", err)
		}
		sortByKey(objs.ProvisioningRequests)
	}
	if v.PodTemplates != nil {
		if objs.PodTemplates, err = v.PodTemplates.List(all); err != nil {
			return fmt.Errorf("list podtemplates: %w", err)
		}
		sortByKey(objs.PodTemplates)
	}
	if v.ResourceQuotas != nil {
		if objs.ResourceQuotas, err = v.ResourceQuotas.List(all); err != nil {
			return fmt.Errorf("list resourcequotas: %w", err)
		}
		sortByKey(objs.ResourceQuotas)
	}
	if v.CapacityBuffers != nil {
		list, err := v.CapacityBuffers.List(all)
		if err != nil {
			return fmt.Errorf("list capacitybuffers: %w", err)
		}
		for _, o := range list {
			b, ok, err := capacitybuffer.FromLister(o)
			if err != nil {
				return err
			}
			if ok {
				objs.CapacityBuffers = append(objs.CapacityBuffers, b)
			}
		}
		sortByKey(objs.CapacityBuffers)
	}
	return nil
}
