package clusterapi

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	cpclusterapi "draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/cloudprovider/providertest"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/clusterapi/infra"
)

// The Cluster API provider keeps the provider contract, against Cluster
// API's own controllers: each row gets a namespace with a MachineDeployment
// "gpu" (min 1, max 3, one running machine, an options override) and a
// MachineDeployment "plain" at zero.
func TestProviderContract(t *testing.T) {
	var n atomic.Int32
	providertest.Run(t, func(t *testing.T) *providertest.Env {
		ns := fmt.Sprintf("capi-contract-%d", n.Add(1))
		ctx, dyn := begin(t, ns)
		slicesJSON, err := yaml.Marshal(gpuSlices(driver, 8))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"gpu", "plain"} {
			tmpl, err := infra.Template(ns, name, gpuSlices(driver, 8), "8", false)
			if err != nil {
				t.Fatal(err)
			}
			create(ctx, t, dyn, tmpl)
		}
		gpu := machineDeployment(ns, "gpu", map[string]string{
			capi.MinSizeAnnotation: "1", capi.MaxSizeAnnotation: "3",
			capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
			capi.TemplateSlicesAnnotation:                                           string(slicesJSON),
			nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime: "5m",
		})
		gpu.Object["spec"].(map[string]any)["replicas"] = int64(1)
		create(ctx, t, dyn, gpu)
		create(ctx, t, dyn, machineDeployment(ns, "plain", map[string]string{
			capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "2",
			capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
		}))
		p, err := cpclusterapi.New(cpclusterapi.Options{Dynamic: dyn, Kube: cp.Client,
			AutoDiscovery: []string{"clusterapi:namespace=" + ns + ",clusterName=" + clusterName}})
		if err != nil {
			t.Fatal(err)
		}
		var member string
		eventually(ctx, t, time.Minute, "the gpu group's machine linked to its node", func() error {
			list, err := dyn.Resource(cpclusterapi.GVR(capi.Machine)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, m := range list.Items {
				id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
				if id == "" {
					continue
				}
				if _, err := cp.Client.CoreV1().Nodes().Get(ctx, strings.TrimPrefix(id, infra.ProviderIDPrefix), metav1.GetOptions{}); err == nil {
					member = strings.TrimPrefix(id, infra.ProviderIDPrefix)
					return nil
				}
			}
			return fmt.Errorf("%d machines, none linked", len(list.Items))
		})
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := cp.Client.CoreV1().Nodes().Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &providertest.Env{Provider: p, Group: capi.MachineDeployment + "/" + ns + "/gpu",
			Plain: capi.MachineDeployment + "/" + ns + "/plain", Member: m, Settle: p.Refresh}
	})
}
