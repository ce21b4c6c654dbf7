package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/simulator/doctor"
	"draxr.dev/draxr/simulator/report"
)

// doctorOutput is what `draxr doctor -o json|yaml` prints.
type doctorOutput struct {
	metav1.TypeMeta `json:",inline"`
	Findings        []doctor.Finding `json:"findings"`
}

func newDoctorCommand(g *globalFlags) *cobra.Command {
	var c commonFlags
	var strict bool
	cmd := &cobra.Command{
		Use:   "doctor [-f FILE|DIR]... | --kubeconfig FILE",
		Short: "Find KEP-5004 pitfalls that silently break DRA-backed extended resources",
		Long: `Checks nodes, pods, ResourceSlices, DeviceClasses and ResourceClaims for the
pitfalls of DRA-backed extended resources and prints one line per finding:
severity, check, the objects involved, what is wrong and what to do.
Exit code: 0 when clean or when only warnings were found (findings that
may break scheduling, such as two classes mapping one name, the KEP's way
to migrate), 1 when an error was found (or any finding, with --strict),
2 for bad input.`,
		Example: exampleText(g.asPlugin, `
# Check a dump: exit 1 on errors
draxr doctor -f cluster.yaml

# Check a kubeconfig context's cluster, failing on warnings too (for CI)
draxr doctor --context prod --strict

# Only the findings about namespace ml, as JSON
draxr doctor -f cluster.yaml -n ml -o json`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := c.load(cmd)
			if err != nil {
				return err
			}
			findings := inNamespace(doctor.Check(objs), g.namespace(cmd))
			out := doctorOutput{TypeMeta: report.TypeMeta(report.KindDoctorReport), Findings: findings}
			if out.Findings == nil {
				out.Findings = []doctor.Finding{}
			}
			if err := report.Write(cmd.OutOrStdout(), c.output, out, func(w io.Writer) error { return findingsTable(w, findings) }); err != nil {
				return err
			}
			errors := 0
			for _, f := range findings {
				if f.Severity == doctor.Error {
					errors++
				}
			}
			warnings := len(findings) - errors
			if errors > 0 || (strict && warnings > 0) {
				return &exitError{code: 1, err: fmt.Errorf("%d problems found (%d errors, %d warnings)", len(findings), errors, warnings)}
			}
			if warnings > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d warnings, no errors (--strict fails on warnings)\n", warnings)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "exit 1 on warnings too")
	c.add(cmd, g)
	return cmd
}

// inNamespace keeps findings that involve namespace, or no namespaced
// object at all (nodes, classes, slices concern every namespace).
func inNamespace(findings []doctor.Finding, namespace string) []doctor.Finding {
	if namespace == "" {
		return findings
	}
	var out []doctor.Finding
	for _, f := range findings {
		namespaced, match := false, false
		for _, o := range f.Objects {
			if o.Namespace != "" {
				namespaced = true
				match = match || o.Namespace == namespace
			}
		}
		if !namespaced || match {
			out = append(out, f)
		}
	}
	return out
}

func findingsTable(w io.Writer, findings []doctor.Finding) error {
	if len(findings) == 0 {
		_, err := fmt.Fprintln(w, "No problems found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tCHECK\tOBJECTS\tPROBLEM AND FIX")
	for _, f := range findings {
		objs := make([]string, len(f.Objects))
		for i, o := range f.Objects {
			objs[i] = o.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s. Fix: %s\n", f.Severity, f.Check, strings.Join(objs, ","), f.Message, f.Advice)
	}
	return tw.Flush()
}
