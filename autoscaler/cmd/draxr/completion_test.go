package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// complete runs the shell's completion request (cobra's hidden __complete
// command, what the scripts of `draxr completion SHELL` call) and returns
// the offered values and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	code, out, errOut := draxr(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d, stderr %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// kubeconfig writes a kubeconfig with three contexts, all on server.
func kubeconfig(t *testing.T, server string) string {
	return writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- {name: east, cluster: {server: "`+server+`"}}
- {name: west, cluster: {server: "`+server+`"}}
users:
- {name: admin, user: {token: x}}
contexts:
- {name: prod, context: {cluster: east, user: admin}}
- {name: prod-west, context: {cluster: west, user: admin}}
- {name: staging, context: {cluster: east, user: admin}}
current-context: prod
`)
}

func TestCompletion(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces" {
			http.NotFound(w, r)
			return
		}
		list := v1.NamespaceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
		for _, n := range []string{"default", "kube-public", "kube-system", "ml"} {
			list.Items = append(list.Items, v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	defer api.Close()
	live := kubeconfig(t, api.URL)
	// A port nobody listens on: the cluster does not answer.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := kubeconfig(t, "http://"+l.Addr().String())
	l.Close()

	const noFiles = ":4" // cobra.ShellCompDirectiveNoFileComp
	tests := []struct {
		args          []string
		want          []string
		wantDirective string
	}{
		{[]string{"simulate", "-o", ""}, []string{"table", "json", "yaml"}, noFiles},
		{[]string{"doctor", "--output", "y"}, []string{"yaml"}, noFiles},
		{[]string{"simulate", "--expander", ""}, []string{"least-waste", "most-pods", "price", "priority", "random"}, noFiles},
		{[]string{"simulate", "--expander", "priority,m"}, []string{"priority,most-pods"}, noFiles},
		{[]string{"--kubeconfig", live, "capacity", "--context", ""}, []string{"prod", "prod-west", "staging"}, noFiles},
		{[]string{"simulate", "--kubeconfig", live, "--context", "prod"}, []string{"prod", "prod-west"}, noFiles},
		{[]string{"doctor", "--kubeconfig", live, "--cluster", "w"}, []string{"west"}, noFiles},
		{[]string{"simulate", "--kubeconfig", live, "-n", "kube-"}, []string{"kube-public", "kube-system"}, noFiles},
		{[]string{"doctor", "--kubeconfig", live, "--namespace", ""}, []string{"default", "kube-public", "kube-system", "ml"}, noFiles},
		// Unreachable or unconfigured: nothing offered, and no error.
		{[]string{"simulate", "--kubeconfig", down, "-n", ""}, nil, noFiles},
		{[]string{"simulate", "--kubeconfig", writeFile(t, "empty", ""), "-n", ""}, nil, noFiles},
		// Files that -f reads: YAML and JSON (cobra.ShellCompDirectiveFilterFileExt).
		{[]string{"simulate", "-f", ""}, []string{"yaml", "yml", "json"}, ":8"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, directive := complete(t, tt.args...)
			if !slices.Equal(got, tt.want) || directive != tt.wantDirective {
				t.Errorf("offered %q, directive %s; want %q, %s", got, directive, tt.want, tt.wantDirective)
			}
		})
	}
}
