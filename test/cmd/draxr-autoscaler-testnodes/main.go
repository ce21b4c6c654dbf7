// Command draxr-autoscaler-testnodes is draxr-autoscaler whose local
// provider starts real test nodes (draxr-test-node processes) instead of
// Node objects. It is a test tool: the shipped draxr-autoscaler links no
// test code.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"draxr.dev/draxr/autoscaler/app"
	"draxr.dev/draxr/test/testnodes"
)

func main() {
	os.Exit(cli.Run(app.NewCommand(testnodes.Extension())))
}
