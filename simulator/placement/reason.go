package placement

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	fwk "k8s.io/kube-scheduler/framework"
)

// Reason says why a pod does not fit a node, in the terms of the plugin
// that rejected it.
type Reason struct {
	Plugin  string
	Message string
	// Never is true when no node can ever take the pod (a scheduler error such
	// as more devices than one claim can hold), not just this node.
	Never bool
}

func (r Reason) String() string {
	if r.Plugin == "" {
		return r.Message
	}
	return r.Plugin + ": " + r.Message
}

var inMemoryClaim = regexp.MustCompile(`(claim )?(\S+/)?` + regexp.QuoteMeta(specialClaimName))

// reasonsFromStatus turns a framework status into reasons.
func reasonsFromStatus(st *fwk.Status) []Reason {
	if st.IsSuccess() {
		return nil
	}
	// The scheduler retries an Error with backoff but never binds the pod.
	never := st.Code() == fwk.Error
	msgs := st.Reasons()
	if len(msgs) == 0 && st.AsError() != nil {
		msgs = []string{st.AsError().Error()}
	}
	out := make([]Reason, 0, len(msgs))
	for _, m := range msgs {
		// One line per reason (CEL errors span several), and the
		// extended-resource claim under a name people can read.
		if strings.ContainsAny(m, "\n\t") {
			m = strings.Join(strings.Fields(m), " ")
		}
		if strings.Contains(m, specialClaimName) {
			m = inMemoryClaim.ReplaceAllString(m, "the pod's extended-resource claim")
		}
		r := Reason{Plugin: st.Plugin(), Message: m, Never: never}
		if never && !strings.HasPrefix(r.Message, "cannot be placed: ") {
			r.Message = "cannot be placed: " + r.Message
		}
		out = append(out, r)
	}
	return out
}

// FitError collects the reasons a pod was rejected, per node.
type FitError struct {
	Pod     string
	PerNode map[string][]Reason
	// PreFilter is set when the pod was rejected before any node was tried.
	PreFilter []Reason
}

func (e *FitError) Error() string {
	if len(e.PreFilter) > 0 {
		return fmt.Sprintf("pod %s: %s", e.Pod, joinReasons(e.PreFilter))
	}
	counts := map[string]int{}
	for _, rs := range e.PerNode {
		for _, r := range rs {
			counts[r.String()]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d node(s): %s", counts[k], k))
	}
	return fmt.Sprintf("pod %s fits none of %d node(s): %s", e.Pod, len(e.PerNode), strings.Join(parts, "; "))
}

// Never reports whether some rejection says no node can ever take the pod.
func (e *FitError) Never() bool {
	for _, r := range e.PreFilter {
		if r.Never {
			return true
		}
	}
	for _, rs := range e.PerNode {
		for _, r := range rs {
			if r.Never {
				return true
			}
		}
	}
	return false
}

// Reasons returns every distinct reason, PreFilter first.
func (e *FitError) Reasons() []Reason {
	out := append([]Reason(nil), e.PreFilter...)
	seen := map[string]bool{}
	names := make([]string, 0, len(e.PerNode))
	for n := range e.PerNode {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, r := range e.PerNode[n] {
			if !seen[r.String()] {
				seen[r.String()] = true
				out = append(out, r)
			}
		}
	}
	return out
}

func joinReasons(rs []Reason) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}
