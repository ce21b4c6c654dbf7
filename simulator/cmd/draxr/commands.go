package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/examples"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/harness"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/report"
)

type commonFlags struct {
	files   []string
	output  string
	maxPods int64
}

func (c *commonFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&c.files, "filename", "f", nil,
		"file or directory of YAML/JSON objects (repeatable); none: the built-in example")
	cmd.Flags().StringVarP(&c.output, "output", "o", "table", "output format: "+strings.Join(report.Formats(), "|"))
	cmd.Flags().Int64Var(&c.maxPods, "max-pods", input.DefaultMaxPods,
		"most pods all workloads in the input may expand to together (the default keeps a run within about 2 GiB)")
}

func (c *commonFlags) load() (*input.Objects, error) {
	if !validFormat(c.output) {
		return nil, badInput(fmt.Errorf("-o: unknown output format %q (want one of %s)", c.output, strings.Join(report.Formats(), ", ")))
	}
	if c.maxPods <= 0 {
		return nil, badInput(fmt.Errorf("--max-pods: must be > 0, got %d", c.maxPods))
	}
	opts := input.Options{MaxPods: c.maxPods}
	var objs *input.Objects
	var err error
	if len(c.files) == 0 {
		objs, err = opts.Parse(examples.Builtin, examples.BuiltinName)
	} else {
		objs, err = opts.LoadPaths(c.files)
	}
	if err != nil {
		return nil, badInput(err)
	}
	return objs, nil
}

func validFormat(f string) bool {
	for _, ok := range report.Formats() {
		if f == ok {
			return true
		}
	}
	return false
}

func newSimulateCommand() *cobra.Command {
	var c commonFlags
	var schedulerConfig, expanderName, priorities string
	var maxNodesTotal int
	cmd := &cobra.Command{
		Use:   "simulate [-f FILE|DIR]...",
		Short: "Plan which node groups grow for the pending pods, and explain every pod left out",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := c.load()
			if err != nil {
				return err
			}
			opts := offline.Options{MaxNodesTotal: maxNodesTotal}
			if maxNodesTotal < 0 {
				return badInput(fmt.Errorf("--max-nodes-total: must be >= 0, got %d", maxNodesTotal))
			}
			if schedulerConfig != "" {
				if opts.Profile, err = harness.LoadProfile(schedulerConfig, ""); err != nil {
					return badInput(err)
				}
			}
			if opts.Expander, err = expander.NewFromFile(expanderName, priorities, 1); err != nil {
				return badInput(err)
			}
			res, err := offline.Simulate(context.Background(), objs, opts)
			if err != nil {
				return err
			}
			out := report.SimulateOutput{Plan: res.Plan, ClassErrors: res.ClassErrors, FeatureGates: featureGatesSet(cmd)}
			return report.Write(cmd.OutOrStdout(), c.output, out, func(w ioWriter) error { return report.PlanTable(w, out) })
		},
	}
	c.add(cmd)
	cmd.Flags().StringVar(&schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration file (default: kube-scheduler's default profile)")
	cmd.Flags().StringVar(&expanderName, "expander", "least-waste", "node group choice: "+strings.Join(expander.Names(), "|")+", or a comma-separated chain such as priority,least-waste")
	cmd.Flags().StringVar(&priorities, "expander-priorities", "", "priority expander config: YAML map of priority to group-name regexps")
	cmd.Flags().IntVar(&maxNodesTotal, "max-nodes-total", 0, "cap on all nodes in the cluster, 0 for none")
	return cmd
}

func newCapacityCommand() *cobra.Command {
	var c commonFlags
	cmd := &cobra.Command{
		Use:   "capacity [-f FILE|DIR]...",
		Short: "Show devices per DeviceClass and extended resource name: total, allocated, free",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := c.load()
			if err != nil {
				return err
			}
			snap, err := offline.BuildSnapshot(objs)
			if err != nil {
				return badInput(err)
			}
			r := capacity.Compute(snap, dynres.NewMatcher())
			return report.Write(cmd.OutOrStdout(), c.output, r, func(w ioWriter) error { return report.CapacityTable(w, r) })
		},
	}
	c.add(cmd)
	return cmd
}
