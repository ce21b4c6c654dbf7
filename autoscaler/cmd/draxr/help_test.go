package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"draxr.dev/draxr/scheduler/kubeversion"
)

// draxrCommands are draxr's own commands (not cobra's help and
// completion), the root first.
func draxrCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c)
		}
	}
	return out
}

// Every command's help has examples, as kubectl's do, and every example
// is a command line draxr takes: known commands, known flags, valid flag
// values' syntax, no stray arguments.
func TestHelpExamples(t *testing.T) {
	for _, asPlugin := range []bool{false, true} {
		name := "draxr"
		if asPlugin {
			name = "kubectl draxr"
		}
		for _, c := range draxrCommands(newRootCommand(asPlugin)) {
			t.Run(name+" "+c.Name(), func(t *testing.T) {
				var help strings.Builder
				root := newRootCommand(asPlugin)
				root.SetOut(&help)
				args := []string{"--help"}
				if c.HasParent() {
					args = []string{c.Name(), "--help"}
				}
				root.SetArgs(args)
				if err := root.Execute(); err != nil {
					t.Fatal(err)
				}
				_, ex, ok := strings.Cut(help.String(), "\nExamples:\n")
				if !ok {
					t.Fatalf("help has no examples:\n%s", help.String())
				}
				ex, _, _ = strings.Cut(ex, "\n\n"+"Available Commands:")
				ex, _, _ = strings.Cut(ex, "\n\nFlags:")
				n := 0
				for _, line := range strings.Split(ex, "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					// A pipeline's draxr part: "kubectl get ... | draxr ...".
					if _, after, ok := strings.Cut(line, "| "); ok {
						line = after
					}
					// A redirect is the shell's: "draxr dump > cluster.yaml".
					line, _, _ = strings.Cut(line, " > ")
					args, ok := strings.CutPrefix(line, name+" ")
					if !ok {
						continue // kubectl get, writing the dump
					}
					n++
					checkCommandLine(t, asPlugin, strings.Fields(args))
				}
				if n == 0 {
					t.Errorf("no example runs %s:\n%s", name, ex)
				}
			})
		}
	}
}

// checkCommandLine parses args as draxr would, without running it.
func checkCommandLine(t *testing.T, asPlugin bool, args []string) {
	t.Helper()
	root := newRootCommand(asPlugin)
	cmd, rest, err := root.Find(args)
	if err == nil {
		err = cmd.ParseFlags(rest)
	}
	if err == nil {
		err = cmd.ValidateArgs(cmd.Flags().Args())
	}
	if err != nil {
		t.Errorf("example %q: %v", strings.Join(args, " "), err)
	}
}

// --version says which Kubernetes release draxr plans for.
func TestVersion(t *testing.T) {
	code, out, errOut := draxr(t, "--version")
	want := "serves Kubernetes " + kubeversion.Minor() + ")\n"
	if code != 0 || !strings.HasPrefix(out, "draxr ") || !strings.HasSuffix(out, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want draxr's name and %q", code, out, errOut, want)
	}
}
