// Command render prints charts/draxr rendered as helm template would,
// with Helm's Go library: values files merged in order over values.yaml,
// validated against values.schema.json, the chart's render-time checks
// applied. NOTES go to stderr. make chart runs it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"

	"draxr.dev/draxr/test/chart"
)

func main() {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	values := fs.String("f", "", "values files, comma-separated; later ones win, as helm's -f")
	release := fs.String("release", "draxr", "release name")
	namespace := fs.String("namespace", "kube-system", "release namespace")
	out := fs.String("o", "", "write the manifests to this file instead of stdout")
	dir := fs.String("chart", "charts/draxr", "the chart's folder")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "render: unexpected arguments %v\n", fs.Args())
		os.Exit(2)
	}
	if err := run(*dir, *values, *release, *namespace, *out); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(dir, files, release, namespace, out string) error {
	vals := map[string]any{}
	for _, f := range strings.Split(files, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return err
		}
		merge(vals, v)
	}
	docs, err := chart.Render(dir, release, namespace, vals)
	if err != nil {
		return err
	}
	notes, err := chart.Notes(dir, release, namespace, vals)
	if err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	for i, d := range docs {
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		fmt.Fprintf(w, "# Source: %s\n%s", d.Template, d.Text)
	}
	fmt.Fprint(os.Stderr, notes)
	return nil
}

// merge sets src's values over dst's, maps merged key by key, as helm
// merges -f files.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}
