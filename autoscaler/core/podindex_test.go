package core

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/simulator/scaleup"
)

func TestPodIndexReportsUnknownPods(t *testing.T) {
	pending := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0", UID: "u0"}}}
	idx := podsByUID(pending)
	tests := []struct {
		name    string
		ref     scaleup.PodRef
		wantErr string
	}{
		{name: "known pod", ref: scaleup.PodRef{Namespace: "ml", Name: "train-0", UID: "u0"}},
		{name: "unknown uid", ref: scaleup.PodRef{Namespace: "ml", Name: "train-1", UID: "u1"},
			wantErr: `plan names pod ml/train-1 (uid "u1"), which is not among this loop's pending pods`},
		{name: "uid reused by another pod", ref: scaleup.PodRef{Namespace: "web", Name: "train-0", UID: "u0"},
			wantErr: "plan names pod web/train-0"},
		{name: "reference without uid", ref: scaleup.PodRef{Namespace: "ml", Name: "train-0"},
			wantErr: "plan names pod ml/train-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := idx.get(tc.ref)
			if tc.wantErr == "" {
				if err != nil || pod != pending[0] {
					t.Fatalf("get(%s) = %v, %v; want the pending pod", tc.ref, pod, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("get(%s) error = %v, want %q", tc.ref, err, tc.wantErr)
			}
		})
	}
}
