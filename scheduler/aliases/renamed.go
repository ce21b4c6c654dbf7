package aliases

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
)

// The framework requires a plugin's Name() to be the name it is
// configured under (score weights are looked up by Name()). Embedding the
// upstream plugin's concrete type keeps every extension point it
// implements, and only the name changes.

type renamedDynamicResources struct {
	*dynamicresources.DynamicResources
	name string
}

func (p *renamedDynamicResources) Name() string { return p.name }

type renamedFit struct {
	*noderesources.Fit
	name string
}

func (p *renamedFit) Name() string { return p.name }

type renamedBalancedAllocation struct {
	*noderesources.BalancedAllocation
	name string
}

func (p *renamedBalancedAllocation) Name() string { return p.name }

func rename(p fwk.Plugin, name string) (fwk.Plugin, error) {
	switch v := p.(type) {
	case *dynamicresources.DynamicResources:
		return &renamedDynamicResources{v, name}, nil
	case *noderesources.Fit:
		return &renamedFit{v, name}, nil
	case *noderesources.BalancedAllocation:
		return &renamedBalancedAllocation{v, name}, nil
	}
	return nil, fmt.Errorf("%s: cannot rename plugin of type %T", name, p)
}
