// Package kubeversion says which Kubernetes release a draxr build is built
// on: the k8s.io/kubernetes module version linked into the binary. One
// draxr release serves one Kubernetes minor, as the Cluster Autoscaler's
// do, and draxr-scheduler refuses an API server older than that minor (the
// libraries would ask for APIs it may not serve).
package kubeversion

import (
	"fmt"
	"runtime/debug"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basever "k8s.io/component-base/version"
)

// Release is draxr's own version; make images sets it to the chart's
// appVersion (-ldflags -X draxr.dev/draxr/scheduler/kubeversion.Release=...).
var Release = "dev"

// Built returns the k8s.io/kubernetes version the binary is built on
// ("v1.37.2"), or "" when the binary carries no module information (test
// binaries).
func Built() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	staging := ""
	for _, dep := range info.Deps {
		v := dep.Version
		if dep.Replace != nil {
			v = dep.Replace.Version
		}
		switch dep.Path {
		case "k8s.io/kubernetes":
			return v
		case "k8s.io/apimachinery":
			// Staging modules are released as v0.X.Y with Kubernetes v1.X.Y;
			// a binary that links no k8s.io/kubernetes package still has
			// this one.
			if strings.HasPrefix(v, "v0.") {
				staging = "v1." + strings.TrimPrefix(v, "v0.")
			}
		}
	}
	return staging
}

// Minor returns the Kubernetes minor the build serves ("1.37"): the
// release component-base is from, compiled in, so known even where the
// binary carries no module information (test binaries).
func Minor() string { return basever.DefaultKubeBinaryVersion }

// Version is what --version prints after a binary's name.
func Version() string { return String(Release) }

// String is the line --version prints after the binary's name.
func String(draxrVersion string) string {
	k := Built()
	if k == "" {
		k = "v" + Minor()
	}
	return fmt.Sprintf("%s, built on Kubernetes %s (serves Kubernetes %s)", draxrVersion, k, Minor())
}

// CheckServer refuses an API server whose minor is older than the one the
// build is built on. A newer server is within the skew policy (a
// scheduler may be older than its API server) and passes.
func CheckServer(server *apimachineryversion.Info) error {
	built := version.MustParseGeneric(Minor())
	got, err := version.ParseGeneric(server.GitVersion)
	if err != nil {
		return fmt.Errorf("API server version %q: %w", server.GitVersion, err)
	}
	if got.Major() < built.Major() || (got.Major() == built.Major() && got.Minor() < built.Minor()) {
		return fmt.Errorf("the API server is Kubernetes %s, older than %s, which this build is made for: upgrade the API servers first, or run the draxr release built for Kubernetes %d.%d",
			server.GitVersion, Minor(), got.Major(), got.Minor())
	}
	return nil
}
