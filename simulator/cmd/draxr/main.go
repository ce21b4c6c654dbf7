// Command draxr is the offline planner: it answers "if these pods arrive,
// which node groups grow, by how many nodes, which pods still will not
// fit, and why?" with DRA-backed extended resources counted right.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries the process exit code: 2 for bad input, 1 otherwise.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func badInput(err error) error { return &exitError{code: 2, err: err} }

func main() {
	root := &cobra.Command{
		Use:           "draxr",
		Short:         "Plan cluster scale-ups for pods that ask for DRA-backed extended resources",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newSimulateCommand(), newCapacityCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

type ioWriter = io.Writer
