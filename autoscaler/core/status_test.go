package core

import (
	"context"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The Cluster Autoscaler's status schema (clusterstate/api/types.go), as
// a reader of CA's status would declare it: the test decodes draxr's
// status key into these with unknown fields rejected, so a field CA does
// not have, or a misspelt one, fails.
type caStatus struct {
	Time             string `json:"time,omitempty"`
	AutoscalerStatus string `json:"autoscalerStatus,omitempty"`
	Message          string `json:"message,omitempty"`
	ClusterWide      struct {
		Health struct {
			Status             string      `json:"status,omitempty"`
			NodeCounts         caNodeCount `json:"nodeCounts,omitempty"`
			LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
			LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
		} `json:"health,omitempty"`
		ScaleUp struct {
			Status             string      `json:"status,omitempty"`
			LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
			LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
		} `json:"scaleUp,omitempty"`
		ScaleDown caScaleDown `json:"scaleDown,omitempty"`
	} `json:"clusterWide,omitempty"`
	NodeGroups []struct {
		Name   string `json:"name,omitempty"`
		Health struct {
			Status              string      `json:"status,omitempty"`
			NodeCounts          caNodeCount `json:"nodeCounts,omitempty"`
			CloudProviderTarget int         `json:"cloudProviderTarget"`
			MinSize             int         `json:"minSize"`
			MaxSize             int         `json:"maxSize"`
			LastProbeTime       metav1.Time `json:"lastProbeTime,omitempty"`
			LastTransitionTime  metav1.Time `json:"lastTransitionTime,omitempty"`
		} `json:"health,omitempty"`
		ScaleUp struct {
			Status      string `json:"status,omitempty"`
			BackoffInfo struct {
				ErrorCode    string `json:"errorCode,omitempty"`
				ErrorMessage string `json:"errorMessage,omitempty"`
			} `json:"backoffInfo,omitempty"`
			LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
			LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
		} `json:"scaleUp,omitempty"`
		ScaleDown caScaleDown `json:"scaleDown,omitempty"`
	} `json:"nodeGroups,omitempty"`
}

type caNodeCount struct {
	Registered struct {
		Total        int `json:"total"`
		Ready        int `json:"ready"`
		NotStarted   int `json:"notStarted"`
		BeingDeleted int `json:"beingDeleted,omitempty"`
		Unready      struct {
			Total           int `json:"total"`
			ResourceUnready int `json:"resourceUnready"`
		} `json:"unready,omitempty"`
	} `json:"registered,omitempty"`
	LongUnregistered int `json:"longUnregistered"`
	Unregistered     int `json:"unregistered"`
}

type caScaleDown struct {
	Status             string      `json:"status,omitempty"`
	Candidates         int         `json:"candidates,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// readStatus reads the status ConfigMap, checks CA's annotation, and
// decodes both keys strictly.
func readStatus(t *testing.T, a *Autoscaler) (caStatus, DraxrStatus) {
	t.Helper()
	cm, err := a.cfg.Client.CoreV1().ConfigMaps(a.cfg.StatusNamespace).Get(context.Background(), a.cfg.StatusName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stamp := cm.Annotations[LastUpdatedAnnotation]
	if _, err := time.Parse(LastUpdatedFormat, stamp); err != nil {
		t.Errorf("annotation %s = %q, not in CA's format: %v", LastUpdatedAnnotation, stamp, err)
	}
	var s caStatus
	if err := yaml.UnmarshalStrict([]byte(cm.Data[StatusKey]), &s); err != nil {
		t.Fatalf("status does not parse with CA's schema: %v\n%s", err, cm.Data[StatusKey])
	}
	var d DraxrStatus
	if body, ok := cm.Data[DraxrStatusKey]; ok {
		if err := yaml.UnmarshalStrict([]byte(body), &d); err != nil {
			t.Fatalf("draxr status: %v\n%s", err, body)
		}
	}
	return s, d
}

// After a scale-up the status is CA's, Running, with the group's sizes and
// its scale-up in progress; a second loop keeps the transition times and
// moves the probe times; draxr's planned devices are under "draxr".
func TestStatusConfigMapHasCASchema(t *testing.T) {
	a, provider, group, _ := setup(t, unschedulablePods(20)...)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	a.cfg.Now = func() time.Time { return now }
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).Times(2)
	group.EXPECT().IncreaseSize(gomock.Any(), 3).Return(nil).Times(2)

	if err := a.WriteInitializingStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, _ := readStatus(t, a); s.AutoscalerStatus != StatusInitializing {
		t.Errorf("autoscalerStatus before the first loop = %q, want Initializing", s.AutoscalerStatus)
	}

	if _, err := a.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, d := readStatus(t, a)
	if s.AutoscalerStatus != StatusRunning || s.Time != t0.Format(LastUpdatedFormat) {
		t.Errorf("autoscalerStatus, time = %q, %q; want Running at %s", s.AutoscalerStatus, s.Time, t0.Format(LastUpdatedFormat))
	}
	if s.ClusterWide.Health.Status != StatusHealthy || s.ClusterWide.ScaleUp.Status != StatusInProgress ||
		s.ClusterWide.ScaleDown.Status != StatusNoCandidates {
		t.Errorf("clusterWide = %+v, want Healthy, scale-up InProgress, NoCandidates", s.ClusterWide)
	}
	if len(s.NodeGroups) != 1 {
		t.Fatalf("nodeGroups = %+v, want gpu only", s.NodeGroups)
	}
	g := s.NodeGroups[0]
	if g.Name != "gpu" || g.Health.MinSize != 0 || g.Health.MaxSize != 10 || g.Health.Status != StatusHealthy || g.ScaleUp.Status != StatusInProgress {
		t.Errorf("node group = %+v, want gpu 0..10 Healthy, scale-up InProgress", g)
	}
	if d.ScaleUp == nil || d.ScaleUp.NodeGroup != "gpu" || d.ScaleUp.NewNodes != 3 || d.ScaleUp.PlannedDevices["gpu.example.com"] != 20 {
		t.Errorf("draxr scaleUp = %+v, want gpu +3 with 20 gpu.example.com devices planned", d.ScaleUp)
	}

	now = t0.Add(time.Minute)
	if _, err := a.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ = readStatus(t, a)
	g = s.NodeGroups[0]
	if !s.ClusterWide.ScaleUp.LastTransitionTime.Equal(&metav1.Time{Time: t0}) || !g.ScaleUp.LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("scale-up lastTransitionTime = %v / %v, want kept at %v", s.ClusterWide.ScaleUp.LastTransitionTime, g.ScaleUp.LastTransitionTime, t0)
	}
	if !g.Health.LastProbeTime.Equal(&metav1.Time{Time: now}) {
		t.Errorf("lastProbeTime = %v, want %v", g.Health.LastProbeTime, now)
	}

	if err := a.DeleteStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := a.cfg.Client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), a.cfg.StatusName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("status ConfigMap after DeleteStatus: %v, want NotFound", err)
	}
}
