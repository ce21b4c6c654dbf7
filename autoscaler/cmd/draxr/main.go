// Command draxr is the offline planner: it answers "if these pods arrive,
// which node groups grow, by how many nodes, which pods still will not
// fit, and why?" with DRA-backed extended resources counted right.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	cliflag "k8s.io/component-base/cli/flag"

	"draxr.dev/draxr/scheduler/kubeversion"
	"draxr.dev/draxr/simulator/featuregates"
)

// featureGatesSet returns the --feature-gates given on the command line.
func featureGatesSet(cmd *cobra.Command) map[string]bool {
	f := cmd.Flags().Lookup("feature-gates")
	if f == nil || !f.Changed {
		return nil
	}
	if m, ok := f.Value.(*cliflag.MapStringBool); ok && m.Map != nil {
		return *m.Map
	}
	return nil
}

// exitError carries the process exit code: 2 for bad input, 1 otherwise.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func badInput(err error) error { return &exitError{code: 2, err: err} }

// pluginName is the executable name under which kubectl runs draxr as
// `kubectl draxr`.
const pluginName = "kubectl-draxr"

// gcPercent is the collector's heap growth for a run: draxr reads a whole
// cluster's objects once and plans, a batch job whose live heap only
// grows, so collecting at every doubling is mostly wasted work (a quarter
// of the CPU of `simulate -f` on a 100,000-pod dump) against ~40% more
// peak memory. GOGC, when set, wins.
const gcPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	notifyInterrupt(cancel)
	os.Exit(runAs(ctx, filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr))
}

// notifyInterrupt cancels with an interrupted cause on the first SIGINT or
// SIGTERM: Ctrl-C ends `simulate --watch`, a slow read or a long plan.
// signal.NotifyContext's cause does not say which signal as a value, and
// the exit code does (128+n, as a shell reports a process the signal
// killed). A second signal gets the default action: it kills at once.
func notifyInterrupt(cancel context.CancelCauseFunc) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		signal.Stop(sigs)
		if s, ok := sig.(syscall.Signal); ok {
			cancel(interrupted{s})
		}
	}()
}

// interrupted is the cause of a run's context ended by a signal.
type interrupted struct{ sig syscall.Signal }

func (e interrupted) Error() string {
	return fmt.Sprintf("interrupted (%s): stopped before finishing", unix.SignalName(e.sig))
}

// run executes the command line args (without the program name) and
// returns the exit code: 0 on success, 2 for bad input (files, flags), 1
// for any other error.
func run(args []string, stdout, stderr io.Writer) int {
	return runAs(context.Background(), "draxr", args, stdout, stderr)
}

// runAs is run for the executable name program: as kubectl-draxr, help
// says "kubectl draxr" and the cluster is read unless -f is given.
func runAs(ctx context.Context, program string, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(strings.TrimSuffix(program, ".exe") == pluginName)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		// Whatever a signal broke off (a read, a plan) says "context
		// canceled"; say what happened instead.
		var sig interrupted
		if errors.As(context.Cause(ctx), &sig) {
			fmt.Fprintln(stderr, "error:", sig)
			return 128 + int(sig.sig)
		}
		fmt.Fprintln(stderr, "error:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		// Cobra's own errors (unknown command or flag, bad flag value)
		// are usage errors: bad input.
		if isUsageError(err) {
			return 2
		}
		return 1
	}
	return 0
}

func newRootCommand(asPlugin bool) *cobra.Command {
	g := &globalFlags{asPlugin: asPlugin}
	root := &cobra.Command{
		Use:   "draxr",
		Short: "Plan cluster scale-ups for pods that ask for DRA-backed extended resources",
		Example: exampleText(asPlugin, `
# Plan the built-in example (no cluster needed)
draxr simulate

# Plan a cluster dump for the NodeGroups that may grow
draxr dump --context prod > cluster.yaml
draxr simulate -f cluster.yaml -f nodegroups.yaml

# Count free devices per DeviceClass in a kubeconfig context's cluster
draxr capacity --context prod

# Find the pitfalls of DRA-backed extended resources in a dump
draxr doctor -f cluster.yaml`),
		Version:       kubeversion.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	// The planner runs the scheduler's plugins, which read the process's
	// feature gates: set them as kube-scheduler's --feature-gates would.
	var gates map[string]bool
	featuregates.AddFlag(root.PersistentFlags(), &gates,
		"A set of key=value pairs for Kubernetes feature gates, as kube-scheduler takes them (default: the defaults of Kubernetes "+kubeversion.Minor()+")")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := featuregates.Apply(gates); err != nil {
			return badInput(err)
		}
		return nil
	}
	if asPlugin {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl draxr"}
	}
	g.add(root.PersistentFlags())
	g.addCompletions(root)
	root.AddCommand(newSimulateCommand(g), newCapacityCommand(g), newDoctorCommand(g), newDumpCommand(g))
	return root
}

// exampleText indents a command's examples as kubectl's are, each command
// line under the name draxr runs as ("kubectl draxr" as a plugin).
func exampleText(asPlugin bool, text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		if asPlugin {
			if strings.HasPrefix(l, "draxr ") {
				l = "kubectl " + l
			}
			l = strings.ReplaceAll(l, "| draxr ", "| kubectl draxr ")
		}
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

// isUsageError reports cobra's errors for a command line it cannot parse
// into a command (flag errors go through the flag error func).
func isUsageError(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}

type ioWriter = io.Writer
