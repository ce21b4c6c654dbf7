// Package chart renders the Helm chart charts/draxr with Helm's own Go
// library, for its tests and for the plain manifests derived from it
// (make manifests).
package chart

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/scheduler/kubeversion"
)

// KubeVersion is the cluster version charts are rendered for: the minor
// draxr is built on.
func KubeVersion() string { return "v" + kubeversion.Minor() + ".0" }

// Dir is the chart's folder under the repository root.
func Dir(root string) string { return filepath.Join(root, "charts", "draxr") }

// Doc is one rendered object: the template it came from, its YAML text
// as rendered (comments included) and the object.
type Doc struct {
	Template string
	Text     string
	Object   *unstructured.Unstructured
}

// Kind, Name and Namespace of the object.
func (d Doc) Kind() string      { return d.Object.GetKind() }
func (d Doc) Name() string      { return d.Object.GetName() }
func (d Doc) Namespace() string { return d.Object.GetNamespace() }

// Component is the draxr part an object belongs to (autoscaler,
// scheduler, example-driver, dashboards), from its
// app.kubernetes.io/name label.
func (d Doc) Component() string {
	return strings.TrimPrefix(d.Object.GetLabels()["app.kubernetes.io/name"], "draxr-")
}

// Render renders the chart at dir as an install of release into
// namespace, values over values.yaml, and returns its objects in
// template order. NOTES.txt is left out.
func Render(dir, release, namespace string, values map[string]any) ([]Doc, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	return RenderChart(ch, release, namespace, values)
}

// RenderChart is Render for a loaded chart.
func RenderChart(ch *chart.Chart, release, namespace string, values map[string]any) ([]Doc, error) {
	out, err := renderFiles(ch, release, namespace, values)
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range out {
		if !strings.HasSuffix(name, "NOTES.txt") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var docs []Doc
	for _, name := range names {
		for i, text := range splitDocs(out[name]) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
				return nil, fmt.Errorf("%s: document %d: %w\n%s", name, i+1, err, text)
			}
			if len(obj) == 0 {
				continue // comments only
			}
			u := &unstructured.Unstructured{Object: obj}
			if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
				return nil, fmt.Errorf("%s: document %d: kind, apiVersion and metadata.name must be set\n%s", name, i+1, text)
			}
			docs = append(docs, Doc{Template: name, Text: text, Object: u})
		}
	}
	return docs, nil
}

// Notes renders the chart's NOTES.txt, what helm install prints.
func Notes(dir, release, namespace string, values map[string]any) (string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("load chart %s: %w", dir, err)
	}
	out, err := renderFiles(ch, release, namespace, values)
	if err != nil {
		return "", err
	}
	return out[ch.Name()+"/templates/NOTES.txt"], nil
}

// renderFiles renders every template as helm install does: values
// coalesced over values.yaml and validated against values.schema.json
// (ToRenderValues), then the templates, keyed by path.
func renderFiles(ch *chart.Chart, release, namespace string, values map[string]any) (map[string]string, error) {
	caps, err := Capabilities()
	if err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, values); err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}

// Capabilities are Helm's default capabilities for a KubeVersion cluster.
func Capabilities() (*chartutil.Capabilities, error) {
	kv, err := chartutil.ParseKubeVersion(KubeVersion())
	if err != nil {
		return nil, err
	}
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = *kv
	return &caps, nil
}

// splitDocs splits a rendered template into its YAML documents, dropping
// empty ones.
func splitDocs(s string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+s, "\n---") {
		d = strings.TrimLeft(d, "\n")
		if strings.TrimSpace(d) != "" {
			docs = append(docs, strings.TrimRight(d, "\n")+"\n")
		}
	}
	return docs
}

// Find returns the object of kind and name, or nil.
func Find(docs []Doc, kind, name string) *Doc {
	for i := range docs {
		if docs[i].Kind() == kind && docs[i].Name() == name {
			return &docs[i]
		}
	}
	return nil
}
