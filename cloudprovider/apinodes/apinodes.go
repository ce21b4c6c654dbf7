// Package apinodes is the one implementation of "a machine is a Node
// object": creating a group's Node, publishing the ResourceSlices its DRA
// drivers would publish (owned by the Node, so they go with it), and
// removing a machine with its slices and the pods that die with it. The
// local provider (which also plays the kubelet) and the kwok provider
// (where the kwok controller plays it) both create and delete nodes
// through it.
package apinodes

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/nodegroup"
)

// Parallelism bounds the API round trips For runs at once: created one
// by one, a 600-pod scale-up's nodes took most of a loop.
const Parallelism = 16

// For runs f for every name, Parallelism at a time, and joins the errors:
// every failed name is reported, and what succeeded stays done.
func For(ctx context.Context, names []string, f func(ctx context.Context, name string) error) error {
	errs := make([]error, len(names))
	sem := make(chan struct{}, Parallelism)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(ctx, name)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// AllOrNone runs create for every name as For does; when any fails,
// remove undoes the ones that succeeded, so that the group is left as it
// was (an atomic increase). The error names every failure, the
// create's and any of the rollback's.
func AllOrNone(ctx context.Context, names []string, create, remove func(ctx context.Context, name string) error) error {
	created := make([]bool, len(names))
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	var mu sync.Mutex
	err := For(ctx, names, func(ctx context.Context, name string) error {
		if err := create(ctx, name); err != nil {
			return err
		}
		mu.Lock()
		created[index[name]] = true
		mu.Unlock()
		return nil
	})
	if err == nil {
		return nil
	}
	var undo []string
	for i, ok := range created {
		if ok {
			undo = append(undo, names[i])
		}
	}
	// The rollback must run even when ctx ended the create.
	rbErr := For(context.WithoutCancel(ctx), undo, remove)
	if rbErr != nil {
		return errors.Join(fmt.Errorf("atomic increase of %d nodes failed and was rolled back: %w", len(names), err),
			fmt.Errorf("rollback: %w", rbErr))
	}
	return fmt.Errorf("atomic increase of %d nodes failed; the %d created were removed: %w", len(names), len(undo), err)
}

// CreateNode creates node (status included: a Node may be created with
// its status, as a kubelet registers) and returns what the API server
// stored. The server assigns the UID, so any UID node carries is dropped.
func CreateNode(ctx context.Context, c kubernetes.Interface, group string, node *v1.Node) (*v1.Node, error) {
	node = node.DeepCopy()
	node.UID = ""
	node.ResourceVersion = ""
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("node group %s: create node %s: %w", group, node.Name, err)
	}
	return created, nil
}

// PublishSlices creates the node's slices, owned by the Node so the
// garbage collector removes any that outlive it; a slice that already
// exists (published before a restart) is left as it is.
func PublishSlices(ctx context.Context, c kubernetes.Interface, node *v1.Node, slices []*resourceapi.ResourceSlice) error {
	for _, s := range slices {
		s = s.DeepCopy()
		s.UID = ""
		s.ResourceVersion = ""
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		_, err := c.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("node %s: publish ResourceSlice %s: %w", node.Name, s.Name, err)
		}
	}
	return nil
}

// Delete removes a machine: its slices, the pods still bound to it (with
// no kubelet behind them they would never go, and on a real machine they
// die with it) and the Node. Objects already gone are not an error.
func Delete(ctx context.Context, c kubernetes.Interface, name string) error {
	err := c.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + name})
	if err != nil {
		return fmt.Errorf("node %s: delete slices: %w", name, err)
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return fmt.Errorf("node %s: list pods: %w", name, err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != name {
			continue // a server (or fake) may ignore the selector
		}
		err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: delete pod %s/%s: %w", name, pod.Namespace, pod.Name, err)
		}
	}
	if err := c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s: delete: %w", name, err)
	}
	return nil
}

// Group is what a group of Node-object machines answers from its
// NodeGroup description alone (bounds, identity, option overrides); the
// providers' groups embed it.
type Group struct {
	Cfg *nodegroup.NodeGroup
	// Options are the group's autoscaling-options-* annotations.
	Options nodegroup.Options
}

func (g *Group) Id() string   { return g.Cfg.Name }
func (g *Group) MinSize() int { return g.Cfg.Spec.MinSize }
func (g *Group) MaxSize() int { return g.Cfg.Spec.MaxSize }

// GetOptions is defaults with the group's overrides, read from its
// annotations as the Cluster API provider reads a MachineDeployment's
// cluster.x-k8s.io/autoscaling-options-*.
func (g *Group) GetOptions(defaults cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
	o := defaults.WithOverrides(g.Options)
	return &o, nil
}

// NodePrice is the group's spec.price (cloudprovider.Pricer);
// ErrNotImplemented when it has none.
func (g *Group) NodePrice() (float64, error) { return cloudprovider.SpecPrice(g.Cfg) }

// NodeGroups returns groups as the Provider interface lists them.
func NodeGroups[G cloudprovider.NodeGroup](groups []G) []cloudprovider.NodeGroup {
	out := make([]cloudprovider.NodeGroup, len(groups))
	for i, g := range groups {
		out[i] = g
	}
	return out
}

// ByProviderID maps the cluster's nodes by spec.providerID. They are read
// from the informer's lister when there is one, so a steady loop sends
// the API server no request (at 5,000 nodes a LIST is tens of MB every
// loop); else with one LIST. The nodes are the cache's: never modify them.
func ByProviderID(ctx context.Context, lister corelisters.NodeLister, c kubernetes.Interface) (map[string]*v1.Node, error) {
	var nodes []*v1.Node
	if lister != nil {
		var err error
		if nodes, err = lister.List(labels.Everything()); err != nil {
			return nil, err
		}
	} else {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			nodes = append(nodes, &list.Items[i])
		}
	}
	byID := make(map[string]*v1.Node, len(nodes))
	for _, n := range nodes {
		if id := n.Spec.ProviderID; id != "" {
			byID[id] = n
		}
	}
	return byID, nil
}

// NodeSlices returns the ResourceSlices node publishes (spec.nodeName is
// node), from the informer's lister when there is one, else with one
// LIST. A template copied from a member reads them every loop. The slices
// may be the cache's: never modify them.
func NodeSlices(ctx context.Context, lister resourcelisters.ResourceSliceLister, c kubernetes.Interface, node string) ([]*resourceapi.ResourceSlice, error) {
	var all []*resourceapi.ResourceSlice
	if lister != nil {
		var err error
		if all, err = lister.List(labels.Everything()); err != nil {
			return nil, err
		}
	} else {
		list, err := c.ResourceV1().ResourceSlices().List(ctx,
			metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + node})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			all = append(all, &list.Items[i])
		}
	}
	var own []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			own = append(own, s)
		}
	}
	return own, nil
}
