package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// BatchRules are the rules the chart's draxr-autoscaler ClusterRole gains
// for a batch flag (enable-provisioning-requests, ...): those on
// autoscaling.x-k8s.io and on the workload objects the batch features
// read. Tests grant them beyond the plain manifests' RBAC, so that a rule
// the chart lacks fails them as it would fail a user.
func BatchRules(root, flag string) ([]rbacv1.PolicyRule, error) {
	docs, err := Render(Dir(root), "draxr", "kube-system", map[string]any{"autoscaler": map[string]any{
		"extraArgs": map[string]any{flag: true}}})
	if err != nil {
		return nil, err
	}
	d := Find(docs, "ClusterRole", "draxr-autoscaler")
	if d == nil {
		return nil, fmt.Errorf("the chart renders no ClusterRole draxr-autoscaler")
	}
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &role); err != nil {
		return nil, err
	}
	var out []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if strings.Join(r.APIGroups, ",") == "autoscaling.x-k8s.io" || slices.Contains(r.Resources, "podtemplates") ||
			slices.Contains(r.Resources, "deployments") || slices.Contains(r.Resources, "jobs") || slices.Contains(r.Resources, "resourcequotas") {
			out = append(out, r)
		}
	}
	return out, nil
}

// GrantBatch gives the ServiceAccount kube-system/draxr-autoscaler the
// chart's BatchRules for flag, in a ClusterRole and binding called name;
// want is how many rules the chart is expected to render for it.
func GrantBatch(ctx context.Context, c kubernetes.Interface, root, flag, name string, want int) error {
	rules, err := BatchRules(root, flag)
	if err != nil {
		return err
	}
	if len(rules) != want {
		return fmt.Errorf("the chart's rules for --%s: %+v, want %d", flag, rules, want)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "draxr-autoscaler"}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
