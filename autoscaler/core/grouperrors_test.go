package core

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/cloudprovider/mocks"
)

// providerWithGroupErrors is the mocked provider plus the clusterapi
// provider's report of objects that are not node groups.
type providerWithGroupErrors struct {
	*mocks.MockProvider
	errs map[string]error
}

func (p *providerWithGroupErrors) GroupErrors() map[string]error { return p.errs }

func (p *providerWithGroupErrors) GroupErrorObject(id string) *v1.ObjectReference {
	if _, ok := p.errs[id]; !ok {
		return nil
	}
	kind, rest, _ := strings.Cut(id, "/")
	ns, name, _ := strings.Cut(rest, "/")
	return &v1.ObjectReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: kind, Namespace: ns, Name: name}
}

// A bad annotation on one group is a Warning event on that object (once
// per distinct error) and a line in the status ConfigMap; the good group
// still scales up in the same loop.
func TestBadGroupIsEventAndStatusOthersScale(t *testing.T) {
	const badID = "MachineDeployment/ns1/bad"
	badMaxSize := errors.New(`MachineDeployment ns1/bad: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "five" is not an integer`)
	badSlices := errors.New("MachineDeployment ns1/bad: annotation draxr: not a list of ResourceSliceSpecs")

	tests := []struct {
		name string
		// loops are the provider's errors in successive loops.
		loops      []map[string]error
		wantEvents []string // messages of InvalidNodeGroupConfig events, in order
		wantStatus string   // in the last loop's status ConfigMap
	}{
		{
			name:       "one event for an error that stays",
			loops:      []map[string]error{{badID: badMaxSize}, {badID: badMaxSize}},
			wantEvents: []string{`"five" is not an integer`},
			wantStatus: `MachineDeployment ns1/bad: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "five" is not an integer`,
		},
		{
			name:       "a changed error is reported again",
			loops:      []map[string]error{{badID: badMaxSize}, {badID: badSlices}},
			wantEvents: []string{`"five" is not an integer`, "not a list of ResourceSliceSpecs"},
			wantStatus: "MachineDeployment ns1/bad: annotation draxr: not a list of ResourceSliceSpecs",
		},
		{
			name:       "a fixed group leaves the status",
			loops:      []map[string]error{{badID: badMaxSize}, {}},
			wantEvents: []string{`"five" is not an integer`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, mock, group, recorder := setup(t, unschedulablePods(4)...)
			provider := &providerWithGroupErrors{MockProvider: mock}
			a.cfg.Provider = provider
			mock.EXPECT().Refresh(gomock.Any()).Return(nil).Times(len(tc.loops))
			// The mocked target stays 0, so every loop asks again.
			group.EXPECT().IncreaseSize(gomock.Any(), 1).Return(nil).Times(len(tc.loops))
			var got []string
			var invalid []DraxrInvalidNodeGroup
			for i, errs := range tc.loops {
				provider.errs = errs
				res, err := a.RunOnce(context.Background())
				if err != nil {
					t.Fatalf("loop %d: %v", i, err)
				}
				if i == 0 && (res.ScaleUp == nil || res.ScaleUp.NodeGroup != "gpu") {
					t.Fatalf("loop 0 scale-up = %+v, want the good group gpu to scale up", res.ScaleUp)
				}
				for _, e := range events(recorder) {
					if strings.Contains(e, EventInvalidNodeGroup) {
						if !strings.HasPrefix(e, v1.EventTypeWarning) {
							t.Errorf("event %q is not a Warning", e)
						}
						got = append(got, e)
					}
				}
				_, d := readStatus(t, a)
				invalid = d.InvalidNodeGroups
			}
			if len(got) != len(tc.wantEvents) {
				t.Fatalf("%s events = %q, want %d", EventInvalidNodeGroup, got, len(tc.wantEvents))
			}
			for i, want := range tc.wantEvents {
				if !strings.Contains(got[i], want) {
					t.Errorf("event %d = %q, want it to contain %q", i, got[i], want)
				}
			}
			if tc.wantStatus == "" {
				if len(invalid) != 0 {
					t.Errorf("status lists invalid groups after the fix: %+v", invalid)
				}
			} else if len(invalid) != 1 || invalid[0].Name != badID || invalid[0].Reason != tc.wantStatus {
				t.Errorf("invalidNodeGroups = %+v, want %s: %s", invalid, badID, tc.wantStatus)
			}
		})
	}
}
