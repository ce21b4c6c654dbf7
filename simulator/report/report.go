// Package report prints plans and capacity reports as tables, JSON or
// YAML, for people and for scripts.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/scaleup"
)

// Formats lists the -o values.
func Formats() []string { return []string{"table", "json", "yaml"} }

// The kinds -o json|yaml prints. Each output says what it is, as a
// Kubernetes object does, in draxr's API group (NodeGroup's): a script
// can tell a plan from a report before it reads either.
const (
	KindPlan           = "Plan"
	KindCapacityReport = "CapacityReport"
	KindDoctorReport   = "DoctorReport"
)

// TypeMeta is the apiVersion and kind of an output of that kind.
func TypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: nodegroup.APIVersion, Kind: kind}
}

// SimulateOutput is what `draxr simulate -o json|yaml` prints.
type SimulateOutput struct {
	metav1.TypeMeta `json:",inline"`
	*scaleup.Plan
	ClassErrors []string `json:"deviceClassErrors,omitempty"`
	// Warnings are what the plan leaves out and a person should know.
	Warnings []string `json:"warnings,omitempty"`
	// FeatureGates are the gates set with --feature-gates: the plan holds
	// for a scheduler running with them.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// ScaleDown (draxr simulate --scale-down) says of every node of an
	// autoscaled group what draxr-autoscaler's scale-down makes of it.
	ScaleDown []scaledown.NodeVerdict `json:"scaleDown,omitempty"`
	// ProvisioningRequests are what draxr-autoscaler sets on each
	// ProvisioningRequest it serves.
	ProvisioningRequests []provreq.Report `json:"provisioningRequests,omitempty"`
	// CapacityBuffers say where each buffer's room is.
	CapacityBuffers []capacitybuffer.Report `json:"capacityBuffers,omitempty"`
}

// NewSimulateOutput is the plan's output, with its apiVersion and kind.
func NewSimulateOutput(plan *scaleup.Plan, classErrors []string) SimulateOutput {
	return SimulateOutput{TypeMeta: TypeMeta(KindPlan), Plan: plan, ClassErrors: classErrors}
}

// CapacityOutput is what `draxr capacity -o json|yaml` prints.
type CapacityOutput struct {
	metav1.TypeMeta `json:",inline"`
	*capacity.Report
}

// NewCapacityOutput is the report's output, with its apiVersion and kind.
func NewCapacityOutput(r *capacity.Report) CapacityOutput {
	return CapacityOutput{TypeMeta: TypeMeta(KindCapacityReport), Report: r}
}

// Write prints v in a machine format, or calls table for "table".
func Write(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "", "table":
		return table(w)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		// Messages quote CEL and selectors ("<input>:1:17", "a && b"):
		// printed as written, as kubectl does, not as \u003c escapes
		// meant for HTML pages.
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("-o: unknown output format %q (want one of %s)", format, strings.Join(Formats(), ", "))
}

// PlanTable prints a plan for people.
func PlanTable(w io.Writer, out SimulateOutput) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := out.Plan
	nodeGroupsTable(tw, p)
	fmt.Fprintln(tw)
	scaleUpsTable(tw, p)
	fmt.Fprintln(tw)
	placementsTable(tw, p)
	fmt.Fprintln(tw)
	noScaleUpTable(tw, p)
	if len(out.ProvisioningRequests) > 0 {
		fmt.Fprintln(tw)
		provisioningRequestsTable(tw, out.ProvisioningRequests)
	}
	if len(out.CapacityBuffers) > 0 {
		fmt.Fprintln(tw)
		capacityBuffersTable(tw, out.CapacityBuffers)
	}
	if out.ScaleDown != nil {
		fmt.Fprintln(tw)
		scaleDownTable(tw, out.ScaleDown)
	}
	if len(out.FeatureGates) > 0 {
		fmt.Fprintf(tw, "\nfeature gates: %s (the scheduler must run with the same)\n", featureGateList(out.FeatureGates))
	}
	for _, e := range append(append([]string(nil), out.ClassErrors...), out.Warnings...) {
		fmt.Fprintf(tw, "\nwarning: %s\n", e)
	}
	return tw.Flush()
}

// The sections below write to PlanTable's one tabwriter, so that its
// columns line up as they always did.

func nodeGroupsTable(tw io.Writer, p *scaleup.Plan) {
	fmt.Fprintln(tw, "NODE GROUPS")
	fmt.Fprintln(tw, "NAME\tMIN\tMAX\tCURRENT\tNEW\tA NEW NODE OFFERS")
	for _, g := range p.Groups {
		offers := make([]string, 0, len(g.Template))
		for _, e := range g.Template {
			offers = append(offers, e.String())
		}
		if len(offers) == 0 {
			offers = []string{"no extended resources"}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t+%d\t%s\n", g.Name, g.MinSize, g.MaxSize, g.CurrentNodes, g.NewNodes, offers[0])
		for _, o := range offers[1:] {
			fmt.Fprintf(tw, "\t\t\t\t\t%s\n", o)
		}
	}
}

func scaleUpsTable(tw io.Writer, p *scaleup.Plan) {
	fmt.Fprintln(tw, "SCALE-UP")
	if len(p.ScaleUps) == 0 {
		fmt.Fprintln(tw, "none")
		return
	}
	fmt.Fprintln(tw, "NODE GROUP\tNEW NODES\tPODS HELPED")
	for _, su := range p.ScaleUps {
		gang := ""
		if su.Gang != "" {
			where := ""
			if su.Topology != nil {
				where = " in " + su.Topology.String()
			}
			gang = " (gang " + su.Gang + where + ", asked all at once)"
		}
		fmt.Fprintf(tw, "%s\t+%d\t%d%s\n", su.NodeGroup, su.NewNodes, len(su.Pods), gang)
	}
}

func placementsTable(tw io.Writer, p *scaleup.Plan) {
	fmt.Fprintln(tw, "PLACEMENTS")
	fmt.Fprintln(tw, "POD\tNODE\tDEVICES")
	for _, pl := range p.ExistingNodes {
		fmt.Fprintf(tw, "%s\t%s (existing)\t%s\n", pl.Pod, pl.Node, devices(pl.Devices))
	}
	for _, su := range p.ScaleUps {
		for _, pl := range su.Placements {
			fmt.Fprintf(tw, "%s\t%s (new)\t%s\n", pl.Pod, pl.Node, devices(pl.Devices))
		}
	}
}

func noScaleUpTable(tw io.Writer, p *scaleup.Plan) {
	fmt.Fprintln(tw, "NO SCALE-UP")
	if len(p.NoScaleUp) == 0 {
		fmt.Fprintln(tw, "every pending pod is placed")
		return
	}
	fmt.Fprintln(tw, "POD\tREASON")
	for _, n := range p.NoScaleUp {
		fmt.Fprintf(tw, "%s\t%s\n", n.Pod, n.Reason)
	}
}

func provisioningRequestsTable(tw io.Writer, requests []provreq.Report) {
	fmt.Fprintln(tw, "PROVISIONING REQUESTS")
	fmt.Fprintln(tw, "REQUEST\tCLASS\tCONDITION\tSCALE-UP\tMESSAGE")
	for _, r := range requests {
		var ups []string
		for _, su := range r.ScaleUp {
			ups = append(ups, fmt.Sprintf("%s +%d", su.NodeGroup, su.NewNodes))
		}
		if len(ups) == 0 {
			ups = []string{"-"}
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s=%s %s\t%s\t%s\n", r.Namespace, r.Name, r.ProvisioningClassName,
			r.Condition.Type, r.Condition.Status, r.Condition.Reason, strings.Join(ups, ", "), r.Condition.Message)
	}
}

func capacityBuffersTable(tw io.Writer, buffers []capacitybuffer.Report) {
	fmt.Fprintln(tw, "CAPACITY BUFFERS")
	fmt.Fprintln(tw, "BUFFER\tREPLICAS\tCONDITION\tON EXISTING NODES\tON NEW NODES\tNO ROOM")
	for _, b := range buffers {
		groups := make([]string, 0, len(b.OnNewNodes))
		for g, n := range b.OnNewNodes {
			groups = append(groups, fmt.Sprintf("%s: %d", g, n))
		}
		sort.Strings(groups)
		if len(groups) == 0 {
			groups = []string{"-"}
		}
		noRoom := "-"
		if b.NoRoom > 0 {
			noRoom = fmt.Sprintf("%d: %s", b.NoRoom, b.Reason)
		}
		cond := b.Condition.Type + "=" + string(b.Condition.Status) + " " + b.Condition.Reason
		if b.Condition.Message != "" && b.Condition.Status != "True" {
			cond += " (" + b.Condition.Message + ")"
		}
		fmt.Fprintf(tw, "%s/%s\t%d\t%s\t%d\t%s\t%s\n", b.Namespace, b.Name, b.Replicas, cond, b.KeptOnExistingNodes,
			strings.Join(groups, ", "), noRoom)
	}
}

func scaleDownTable(tw io.Writer, verdicts []scaledown.NodeVerdict) {
	fmt.Fprintln(tw, "SCALE-DOWN")
	fmt.Fprintln(tw, "NODE\tNODE GROUP\tVERDICT\tREASON")
	for _, v := range verdicts {
		reason := v.Reason
		if v.Code != "" {
			reason = string(v.Code) + ": " + reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Node, v.NodeGroup, v.Verdict, reason)
	}
}

// featureGateList is the gates as --feature-gates takes them, by name.
func featureGateList(gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for name := range gates {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		names[i] = fmt.Sprintf("%s=%t", name, gates[name])
	}
	return strings.Join(names, ",")
}

func devices(ds []string) string {
	if len(ds) == 0 {
		return "-"
	}
	return strings.Join(ds, ",")
}

// CapacityTable prints a capacity report for people.
func CapacityTable(w io.Writer, r *capacity.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE CLASS\tTOTAL\tALLOCATED\tFREE\tTAINTED\tBY NODE GROUP")
	for _, row := range r.Classes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", row.Name, row.Total, row.Allocated, row.Free, row.Tainted, parts(row.Groups))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "EXTENDED RESOURCE\tSOURCE\tTOTAL\tALLOCATED\tFREE\tTAINTED\tBY NODE")
	for _, row := range r.Resources {
		src := string(row.Source)
		if row.Class != "" {
			src += " (" + row.Class + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", row.Name, src, row.Total, row.Allocated, row.Free, row.Tainted, parts(row.Nodes))
	}
	// Partitioned hardware only: what whole devices do not say.
	header := true
	for _, row := range r.Classes {
		for _, p := range row.Partitions {
			if header {
				fmt.Fprintln(tw)
				fmt.Fprintln(tw, "DEVICE CLASS\tPARTITION PROFILE\tAT MOST\tFREE")
				header = false
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", row.Name, p.Profile, p.Total, p.Free)
		}
	}
	if len(r.Counters) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "DRIVER\tCOUNTER\tTOTAL\tCONSUMED\tFREE")
		for _, c := range r.Counters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Driver, c.Counter, c.Total.String(), c.Consumed.String(), c.Free.String())
		}
	}
	if len(r.SharedDevices) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "SHARED DEVICE\tNODE\tSHARES\tIN USE\tCAPACITY (CONSUMED/TOTAL, FREE)")
		for _, d := range r.SharedDevices {
			caps := make([]string, len(d.Capacity))
			for i, c := range d.Capacity {
				caps[i] = fmt.Sprintf("%s %s/%s, %s free", c.Name, c.Consumed, c.Total, c.Free)
			}
			if len(caps) == 0 {
				caps = []string{"-"}
			}
			fmt.Fprintf(tw, "%s/%s/%s\t%s\t%d\t%.0f%%\t%s\n", d.Driver, d.Pool, d.Device, d.Node, d.Shares, 100*d.Use, strings.Join(caps, "; "))
		}
	}
	return tw.Flush()
}

func parts(ps []capacity.Part) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%s %d/%d free", p.Name, p.Free, p.Total)
	}
	return strings.Join(s, ", ")
}
