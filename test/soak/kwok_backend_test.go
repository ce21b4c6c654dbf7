package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider/kwok"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/controlplane"
	testkwok "draxr.dev/draxr/test/kwok"
)

// kwokBackend is CA's kwok provider (--cloud-provider=kwok) with the kwok
// controller in process: fake nodes made Ready, heartbeated and running
// their pods by kwok's stages, as in CA's kwok setups. kwok's fast stages
// finish a Job's pods as soon as they run, and every fake node turns
// Ready, so a never-Ready group is not part of this backend's soak.
type kwokBackend struct{}

func (kwokBackend) name() string {
	return "kwok provider (fake nodes run by the kwok controller)"
}

func (kwokBackend) controllers() []string { return testkwok.Controllers() }

func (kwokBackend) supports(k groupKind) bool { return k != neverReady }

func (kwokBackend) configure(ctx context.Context, cp *controlplane.ControlPlane, _ string, gs []group, _ timings) ([]string, error) {
	config := "apiVersion: v1alpha1\nreadNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: " + nodegroup.GroupLabel +
		"\nnodes:\n  skipTaint: true\nconfigmap:\n  name: " + kwok.DefaultTemplatesName + "\n"
	var templates []*v1.Node
	for _, g := range gs {
		n := g.template()
		n.Name = g.name + "-template"
		n.Labels[nodegroup.GroupLabel] = g.name
		n.Annotations = map[string]string{
			kwok.MinSizeAnnotation: fmt.Sprint(g.min), kwok.MaxSizeAnnotation: fmt.Sprint(g.max),
		}
		if slices := g.slices(); len(slices) > 0 {
			b, err := yaml.Marshal(slices)
			if err != nil {
				return nil, err
			}
			n.Annotations[capi.TemplateSlicesAnnotation] = string(b)
		}
		templates = append(templates, n)
	}
	if err := (&testkwok.Cluster{CP: cp}).Configure(ctx, metav1.NamespaceSystem, config, templates...); err != nil {
		return nil, err
	}
	return []string{"--cloud-provider=kwok", "--namespace=" + metav1.NamespaceSystem}, nil
}

func (kwokBackend) start(ctx context.Context, cp *controlplane.ControlPlane) error {
	logFile, err := os.Create(filepath.Join(cp.Dir, "kwok.log"))
	if err != nil {
		return err
	}
	c, err := testkwok.Start(ctx, testkwok.Options{Kubeconfig: cp.AdminKubeconfig, LeaseDuration: 40 * time.Second, Log: logFile})
	if err != nil {
		logFile.Close()
		return err
	}
	go func() {
		<-ctx.Done()
		c.Stop()
		logFile.Close()
	}()
	return nil
}
