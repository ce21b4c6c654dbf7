package kubeversion

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Minor is the release component-base (a staging module, released with
// Kubernetes) is from; go.mod pins every staging module to one release.
func TestMinor(t *testing.T) {
	v := version.MustParseGeneric(Minor())
	if v.Major() != 1 || v.Minor() < 37 {
		t.Errorf("Minor() = %q, want 1.37 or later", Minor())
	}
	if s := String("v0.3.0"); !strings.HasPrefix(s, "v0.3.0, built on Kubernetes v") || !strings.Contains(s, "serves Kubernetes "+Minor()) {
		t.Errorf("String = %q", s)
	}
}

func TestCheckServer(t *testing.T) {
	v := version.MustParseGeneric(Minor())
	older := version.MajorMinor(v.Major(), v.Minor()-1)
	for _, tc := range []struct {
		server  string
		wantErr bool
	}{
		{server: "v" + older.String() + ".9", wantErr: true},
		{server: "v" + version.MajorMinor(v.Major(), v.Minor()).String() + ".0"},
		{server: "v" + Minor() + ".2-gke.100"},
		{server: "v" + version.MajorMinor(v.Major(), v.Minor()+1).String() + ".0"},
	} {
		err := CheckServer(&apimachineryversion.Info{GitVersion: tc.server})
		if (err != nil) != tc.wantErr {
			t.Errorf("server %s: err = %v, want error %v", tc.server, err, tc.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "upgrade the API servers first") || !strings.Contains(err.Error(), tc.server)) {
			t.Errorf("server %s: error %q does not say what to do", tc.server, err)
		}
	}
}
