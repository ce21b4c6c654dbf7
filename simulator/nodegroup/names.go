package nodegroup

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// maxPrefix leaves room in a 63-character DNS label for "-new-" or
// "-upcoming-" and an index.
const maxPrefix = 40

// NodeNamePrefix is what the names of a group's planned nodes start with:
// a DNS-1123 label derived from the group's name. A Cluster API group is
// named "MachineDeployment/<namespace>/<name>" (CA's id), which is no node
// name; its nodes are named after the object, as its Machines are.
func NodeNamePrefix(group string) string {
	if i := strings.LastIndexByte(group, '/'); i >= 0 {
		group = group[i+1:]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(group) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > maxPrefix {
		s = strings.TrimRight(s[:maxPrefix], "-")
	}
	if s == "" {
		s = "node"
	}
	return s
}

// NodeNamePrefixes returns each group's prefix, unique among the groups:
// two groups whose names derive the same prefix (MachineDeployments "gpu"
// in two namespaces) each get a short hash of their full name appended.
func NodeNamePrefixes(groups []string) map[string]string {
	byPrefix := map[string]int{}
	for _, g := range groups {
		byPrefix[NodeNamePrefix(g)]++
	}
	out := make(map[string]string, len(groups))
	for _, g := range groups {
		p := NodeNamePrefix(g)
		if byPrefix[p] > 1 {
			h := fnv.New32a()
			h.Write([]byte(g))
			p = fmt.Sprintf("%s-%05x", p, h.Sum32()&0xfffff)
		}
		out[g] = p
	}
	return out
}
