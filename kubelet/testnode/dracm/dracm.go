// Package dracm is the container manager of draxr's test nodes: kubemark's
// stub container manager (no cgroups, no device plugins) with the DRA
// parts replaced by the kubelet's real DRA manager
// (k8s.io/kubernetes/pkg/kubelet/cm/dra).
//
// The stub alone is a trap for DRA tests: it registers no DRA plugin
// handler, never calls NodePrepareResources and gives containers no CDI
// devices, yet pods still reach Running. With this manager the kubelet
// registers drivers from <root>/plugins_registry, prepares every claim of
// a pod (including the scheduler's extended-resource claim, found through
// pod.status.extendedResourceClaimStatus) before its containers start,
// puts the prepared CDI device IDs into each container's run options, and
// unprepares when the pod is gone, just as the real container manager
// does on Linux.
package dracm

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	pluginwatcherapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/status"

	"k8s.io/client-go/kubernetes"
)

// Manager is a cm.ContainerManager. Methods not defined here are the
// stub's; device health (UpdateAllocatedResourcesStatus, Updates) is one
// of them, so pod status carries no allocatedResourcesStatus.
type Manager struct {
	cm.ContainerManager
	dra *dra.Manager
}

var _ cm.ContainerManager = (*Manager)(nil)

// New wraps stub (cm.NewStubContainerManager or a variant with device
// plugin resources) with a DRA manager that keeps its checkpoint in
// rootDir, the kubelet's root directory, as the real kubelet does.
func New(logger klog.Logger, stub cm.ContainerManager, client kubernetes.Interface, rootDir string) (*Manager, error) {
	m, err := dra.NewManager(logger, client, rootDir)
	if err != nil {
		return nil, fmt.Errorf("DRA manager: %w", err)
	}
	return &Manager{ContainerManager: stub, dra: m}, nil
}

// Start starts the stub and the DRA manager; the kubelet calls it before
// it asks for plugin registration handlers.
func (m *Manager) Start(ctx context.Context, node *v1.Node, activePods cm.ActivePodsFunc, getNode cm.GetNodeFunc,
	sourcesReady config.SourcesReady, podStatus status.PodStatusProvider, runtime internalapi.RuntimeService, localStorage bool) error {
	if err := m.ContainerManager.Start(ctx, node, activePods, getNode, sourcesReady, podStatus, runtime, localStorage); err != nil {
		return err
	}
	return m.dra.Start(ctx, dra.ActivePodsFunc(activePods), dra.GetNodeFunc(getNode), sourcesReady)
}

// GetPluginRegistrationHandlers hands the kubelet's plugin watcher the
// DRA handler, through which drivers in plugins_registry register.
func (m *Manager) GetPluginRegistrationHandlers() map[string]cache.PluginHandler {
	handlers := map[string]cache.PluginHandler{}
	for name, h := range m.ContainerManager.GetPluginRegistrationHandlers() {
		handlers[name] = h
	}
	handlers[pluginwatcherapi.DRAPlugin] = m.dra.GetWatcherHandler()
	return handlers
}

// PrepareDynamicResources calls NodePrepareResources of the drivers for
// all claims of the pod; the kubelet does not start the pod until it
// succeeds.
func (m *Manager) PrepareDynamicResources(ctx context.Context, pod *v1.Pod) error {
	return m.dra.PrepareResources(ctx, pod)
}

// UnprepareDynamicResources calls NodeUnprepareResources once no running
// pod uses a claim any more.
func (m *Manager) UnprepareDynamicResources(ctx context.Context, pod *v1.Pod) error {
	return m.dra.UnprepareResources(ctx, pod)
}

// PodMightNeedToUnprepareResources keeps the kubelet from forgetting a
// terminated pod before its claims are unprepared.
func (m *Manager) PodMightNeedToUnprepareResources(uid types.UID) bool {
	return m.dra.PodMightNeedToUnprepareResources(uid)
}

// GetResources adds the CDI device IDs of the container's prepared
// requests to the run options; the kubelet copies them into the CRI
// CreateContainer request. For the extended-resource claim, the DRA
// manager picks the requests mapped to this container in
// pod.status.extendedResourceClaimStatus.requestMappings.
func (m *Manager) GetResources(ctx context.Context, pod *v1.Pod, container *v1.Container) (*kubecontainer.RunContainerOptions, error) {
	opts, err := m.ContainerManager.GetResources(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	info, err := m.dra.GetResources(pod, container)
	if err != nil {
		return nil, err
	}
	opts.CDIDevices = append(opts.CDIDevices, info.CDIDevices...)
	return opts, nil
}

// GetDynamicResources answers the pod resources API: the claims a
// container uses, with their devices and CDI IDs.
func (m *Manager) GetDynamicResources(logger klog.Logger, pod *v1.Pod, container *v1.Container) []*podresourcesapi.DynamicResource {
	infos, err := m.dra.GetContainerClaimInfos(pod, container)
	if err != nil {
		logger.Error(err, "Pod resources: claim infos", "pod", klog.KObj(pod), "container", container.Name)
		return nil
	}
	var out []*podresourcesapi.DynamicResource
	for _, info := range infos {
		r := &podresourcesapi.DynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace}
		for driver, st := range info.DriverState {
			for _, d := range st.Devices {
				cr := &podresourcesapi.ClaimResource{DriverName: driver, PoolName: d.PoolName, DeviceName: d.DeviceName, ShareId: (*string)(d.ShareID)}
				for _, id := range d.CDIDeviceIDs {
					cr.CdiDevices = append(cr.CdiDevices, &podresourcesapi.CDIDevice{Name: id})
				}
				r.ClaimResources = append(r.ClaimResources, cr)
			}
		}
		out = append(out, r)
	}
	return out
}
