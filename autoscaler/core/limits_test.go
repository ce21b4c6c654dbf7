package core

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/limits"
)

// The live loop honours CA's limits: IncreaseSize is asked for the capped
// count, and the pods the cap leaves out get NotTriggerScaleUp naming the
// limit. 20 one-GPU pods want 3 nodes of 64 cores and 8 DRA GPUs.
func TestScaleUpHonoursLimits(t *testing.T) {
	tests := []struct {
		name      string
		opts      limits.Options
		wantNodes int
		wantWhy   string
	}{
		{name: "--cores-total", opts: limits.Options{Limits: limits.Limits{Cores: limits.Range{Max: 128}}}, wantNodes: 2,
			wantWhy: "max cluster cpu limit reached"},
		{name: "--gpu-total counts DRA devices", opts: limits.Options{Limits: limits.Limits{GPUs: []limits.GPULimit{
			{Type: v1.ResourceName("example.com/gpu"), Range: limits.Range{Max: 8}}}}}, wantNodes: 1,
			wantWhy: "max cluster example.com/gpu limit reached"},
		{name: "--max-nodes-per-scaleup", opts: limits.Options{MaxNodesPerScaleUp: 1}, wantNodes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, provider, group, recorder := setup(t, unschedulablePods(20)...)
			a.cfg.Limits = tc.opts
			provider.EXPECT().Refresh(gomock.Any()).Return(nil)
			group.EXPECT().IncreaseSize(gomock.Any(), tc.wantNodes).Return(nil)
			res, err := a.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.ScaleUp == nil || res.ScaleUp.NewNodes != tc.wantNodes || len(res.ScaleUp.Pods) != 8*tc.wantNodes {
				t.Fatalf("scale-up = %+v, want gpu +%d for %d pods", res.ScaleUp, tc.wantNodes, 8*tc.wantNodes)
			}
			notTriggered := 0
			for _, e := range events(recorder) {
				if strings.Contains(e, "NotTriggerScaleUp") {
					notTriggered++
					if !strings.Contains(e, tc.wantWhy) {
						t.Errorf("event %q, want it to say %q", e, tc.wantWhy)
					}
				}
			}
			if tc.wantWhy != "" && notTriggered != 20-8*tc.wantNodes {
				t.Errorf("NotTriggerScaleUp events = %d, want %d", notTriggered, 20-8*tc.wantNodes)
			}
		})
	}
}
