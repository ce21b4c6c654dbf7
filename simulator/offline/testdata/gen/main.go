// Command gen writes a cluster dump for measuring `draxr simulate -f` and
// `draxr capacity -f` at scale (see docs/performance.md): existing 64-CPU
// nodes, one 64-CPU NodeGroup and pending one-CPU pods of many
// ReplicaSets, one document each, or with -list as the items of one List
// (what `kubectl get -o yaml` writes).
//
//	go run ./simulator/offline/testdata/gen -pods 60000 > /tmp/cluster.yaml
package main

import (
	"bufio"
	"flag"
	"os"

	"draxr.dev/draxr/simulator/fixtures"
)

func main() {
	pods := flag.Int("pods", 60000, "pending pods")
	sets := flag.Int("replicasets", 100, "ReplicaSets the pods belong to")
	nodes := flag.Int("nodes", 50, "existing 64-CPU nodes")
	list := flag.Bool("list", false, "write one List instead of a document per object")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	write := fixtures.WriteCPUDump
	if *list {
		write = fixtures.WriteCPUList
	}
	write(w, *nodes, *pods, *sets)
}
