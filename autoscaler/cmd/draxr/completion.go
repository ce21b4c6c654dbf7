package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// completionTimeout bounds the API call behind a completion: a shell
// waits for it on every Tab.
const completionTimeout = 5 * time.Second

// completeWith registers the completion of a flag's value. A flag that is
// not there is a programming error every test shows.
func completeWith(cmd *cobra.Command, flag string, f cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, f); err != nil {
		panic(err)
	}
}

// markFiles makes the shell offer files with these extensions (and
// directories) for flags that read them.
func markFiles(cmd *cobra.Command, flags ...string) {
	for _, f := range flags {
		if err := cmd.MarkFlagFilename(f, "yaml", "yml", "json"); err != nil {
			panic(err)
		}
	}
}

// fixedValues completes from a fixed list; with comma, the last element of
// a comma-separated list ("priority,le" offers "priority,least-waste").
func fixedValues(values []string, comma bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		head := ""
		if i := strings.LastIndex(toComplete, ","); comma && i >= 0 {
			head = toComplete[:i+1]
		}
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(head+v, toComplete) {
				out = append(out, head+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// addCompletions completes the connection flags as kubectl does:
// contexts, clusters and users from the kubeconfig, namespaces from the
// cluster when it answers.
func (g *globalFlags) addCompletions(root *cobra.Command) {
	completeWith(root, "context", g.fromKubeconfig(func(c *clientcmdapi.Config) []string { return sortedKeys(c.Contexts) }))
	completeWith(root, "cluster", g.fromKubeconfig(func(c *clientcmdapi.Config) []string { return sortedKeys(c.Clusters) }))
	completeWith(root, "user", g.fromKubeconfig(func(c *clientcmdapi.Config) []string { return sortedKeys(c.AuthInfos) }))
	completeWith(root, "namespace", g.completeNamespaces)
	// A kubeconfig is any file (~/.kube/config has no extension).
	if err := root.MarkPersistentFlagFilename("kubeconfig"); err != nil {
		panic(err)
	}
}

func (g *globalFlags) fromKubeconfig(names func(*clientcmdapi.Config) []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		raw, err := g.kube.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(names(&raw), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaces lists the namespaces of the cluster the other flags
// select; none when it cannot be read.
func (g *globalFlags) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	names, err := g.namespaces(cmd.Context())
	if err != nil {
		cobra.CompDebugln(fmt.Sprintf("namespaces: %v", err), false)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (g *globalFlags) namespaces(ctx context.Context) ([]string, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	return names, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func withPrefix(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
