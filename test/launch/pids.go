package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PIDs are the node processes recorded in dir as <node>.pid files (a
// --local-test-node-dir of test/testnodes), by node name: what is left to
// stop when the autoscaler that started them is gone.
func PIDs(dir string) map[string]int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	out := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			out[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	return out
}
