// Package auditlog reads the API server's audit log (JSON lines, as
// controlplane.Options.AuditUsers writes it) to count what one user, the
// autoscaler, asks of the API server: the end-to-end suites and the live
// benchmark use it to show that a steady loop sends no LIST of what the
// autoscaler watches.
package auditlog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AutoscalerUser is draxr-autoscaler's user as the tests run it (the
// shipped RBAC's ServiceAccount).
const AutoscalerUser = "system:serviceaccount:kube-system:draxr-autoscaler"

// WatchedResources are what the autoscaler and its providers read through
// informers: after the first loop it must send no LIST of them.
func WatchedResources() []string {
	return []string{"nodes", "resourceslices", "machines", "machinesets", "machinedeployments", "machinepools"}
}

// Policy is an audit policy that logs users' requests at Metadata level
// (no bodies) and nothing else's: cheap enough to leave on for a suite.
func Policy(users ...string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: [` + strings.Join(quoted, ", ") + `]
- level: None
`
}

// Counts are one user's completed requests, by verb ("list") and by verb
// and resource ("list nodes", "get configmaps", "update
// machinedeployments/scale").
type Counts struct {
	ByVerb, ByResource map[string]int
}

// Read counts user's completed requests in the audit log at path from
// byte offset on, and returns the offset after the last whole line (a
// partial last line is read next time).
func Read(path string, offset int64, user string) (Counts, int64, error) {
	c := Counts{ByVerb: map[string]int{}, ByResource: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return c, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return c, offset, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	next := offset
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break
		}
		next += int64(len(line))
		var ev struct {
			Verb      string                    `json:"verb"`
			User      struct{ Username string } `json:"user"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.User.Username != user {
			continue
		}
		res := ""
		if ev.ObjectRef != nil {
			res = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				res += "/" + ev.ObjectRef.Subresource
			}
		}
		c.ByVerb[ev.Verb]++
		c.ByResource[strings.TrimSpace(ev.Verb+" "+res)]++
	}
	return c, next, nil
}

// End is the log's end (after its last whole line): requests before it
// are not counted by a Read from there.
func End(path string) (int64, error) {
	_, next, err := Read(path, 0, "")
	return next, err
}

// Lists are the LIST requests of resources among the counts, by resource;
// empty when there are none.
func (c Counts) Lists(resources ...string) map[string]int {
	out := map[string]int{}
	for _, r := range resources {
		if n := c.ByResource["list "+r]; n > 0 {
			out[r] = n
		}
	}
	return out
}

// String lists every "verb resource=count", sorted.
func (c Counts) String() string {
	keys := sortedKeys(c.ByResource)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.ByResource[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// PerLoop formats counts (ByVerb or ByResource) divided by loops, sorted,
// as "verb:resource=count,...", the live benchmark's requests/loop.
func PerLoop(counts map[string]int, loops float64) string {
	var parts []string
	for _, k := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%s=%.1f", strings.ReplaceAll(k, " ", ":"), float64(counts[k])/loops))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// NoLists is nil when the counts hold no LIST of resources
// (WatchedResources when none are given), else an error naming the LISTs
// and every request seen over loops.
func (c Counts) NoLists(loops float64, resources ...string) error {
	if len(resources) == 0 {
		resources = WatchedResources()
	}
	lists := c.Lists(resources...)
	if len(lists) == 0 {
		return nil
	}
	seen := Counts{ByResource: map[string]int{}}
	for r, n := range lists {
		seen.ByResource["list "+r] = n
	}
	return fmt.Errorf("over %.0f steady loops the autoscaler sent LISTs of what it watches: %s (all its requests: %s)",
		loops, seen, c)
}

// Loops reads the autoscaler's count and total seconds of main loops from
// its /metrics at addr (host:port).
func Loops(ctx context.Context, addr string) (count, seconds float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		for prefix, into := range map[string]*float64{
			`cluster_autoscaler_function_duration_seconds_count{function="main"} `: &count,
			`cluster_autoscaler_function_duration_seconds_sum{function="main"} `:   &seconds,
		} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				*into, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
	}
	return count, seconds, nil
}

// WaitLoops waits until the autoscaler at addr has run at least from+n
// main loops, and returns the count and total seconds then.
func WaitLoops(ctx context.Context, addr string, from float64, n int, timeout time.Duration) (count, seconds float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		count, seconds, err = Loops(ctx, addr)
		if err == nil && count >= from+float64(n) {
			return count, seconds, nil
		}
		select {
		case <-ctx.Done():
			return count, seconds, fmt.Errorf("waiting %s for %d autoscaler loops after the first %.0f: %.0f in all (last error: %v)", timeout, n, from, count, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Window is the audit of the autoscaler from one moment on.
type Window struct {
	log, user, addr string
	offset          int64
	loops           float64
}

// Begin starts a window on the audit log for user, the autoscaler
// serving /metrics at addr; the autoscaler must have run a loop.
func Begin(ctx context.Context, log, user, addr string) (*Window, error) {
	loops, _, err := WaitLoops(ctx, addr, 0, 1, time.Minute)
	if err != nil {
		return nil, err
	}
	offset, err := End(log)
	if err != nil {
		return nil, err
	}
	return &Window{log: log, user: user, addr: addr, offset: offset, loops: loops}, nil
}

// Close waits until at least n whole loops have run since Begin (a loop
// under way at Begin is not whole), and returns the user's requests since
// Begin and how many loops ended. The log is read at once: a control
// plane's (controlplane.Options.AuditUsers) writes each request before
// answering it; a batching backend's last second may be missing.
func (w *Window) Close(ctx context.Context, n int, timeout time.Duration) (Counts, float64, error) {
	loops, _, err := WaitLoops(ctx, w.addr, w.loops, n+1, timeout)
	if err != nil {
		return Counts{}, 0, err
	}
	c, _, err := Read(w.log, w.offset, w.user)
	return c, loops - w.loops, err
}

// SteadyLoops runs during (a check that nothing changes) inside a window
// on the autoscaler at addr, then waits until at least loops whole loops
// have run since the window began. It returns the autoscaler's requests
// over them and how many loops ended; the error names any LIST of
// WatchedResources among them.
func SteadyLoops(ctx context.Context, log, addr string, loops int, during func()) (Counts, float64, error) {
	w, err := Begin(ctx, log, AutoscalerUser, addr)
	if err != nil {
		return Counts{}, 0, err
	}
	during()
	c, n, err := w.Close(ctx, loops, time.Minute)
	if err != nil {
		return c, n, err
	}
	return c, n, c.NoLists(n)
}
