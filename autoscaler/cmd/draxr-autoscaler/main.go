// Command draxr-autoscaler scales node groups whose devices DRA drivers
// publish, counting the devices pods take through DRA-backed extended
// resources, up and down. Flags follow the Cluster Autoscaler's.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"draxr.dev/draxr/autoscaler/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
