package placement

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// VerifyShortcutsEnv names the environment variable that, set to any
// value in a build with -tags draxrverify (make test's), makes every exact
// shortcut of the placement engine also take the full scheduler path and
// stop the process on any difference (docs/shortcuts.md). The golden and
// fidelity suites set it. A build without the tag, every shipped binary,
// never reads it: a production process must not panic on its environment.
const VerifyShortcutsEnv = "DRAXR_VERIFY_SHORTCUTS"

// VerifyShortcutsBuilt reports whether this build honours
// VerifyShortcutsEnv (it was built with -tags draxrverify).
const VerifyShortcutsBuilt = verifyBuilt

// VerifiesShortcuts reports whether the shortcuts are held to the full
// path (VerifyShortcutsEnv), for callers with shortcuts of their own.
func (eng *Engine) VerifiesShortcuts() bool { return eng.verify }

// ShortcutDiffers stops the process: a shortcut gave another answer than
// the full path, so a plan could be wrong. A panic, not an error: it
// only happens under VerifyShortcutsEnv, in test builds, where it must not
// be mistaken for a pod's reason. The message leaves the variable unnamed
// so that shipped binaries hold no trace of it (test/cli checks).
func ShortcutDiffers(shortcut, format string, args ...any) {
	panic(fmt.Sprintf("draxr: the %s shortcut differs from the scheduler's full path (shortcuts verified): %s",
		shortcut, fmt.Sprintf(format, args...)))
}

// VerifyRejects holds a shortcut that ruled the pod out of a node to the
// full path: PreFilter and Filter must reject it there too.
func (eng *Engine) VerifyRejects(shortcut string, pod *v1.Pod, nodeName string) {
	if eng.CheckPredicates(pod, nodeName) == nil {
		ShortcutDiffers(shortcut, "it ruled pod %s out of node %s, which the scheduler's plugins accept", podKey(pod), nodeName)
	}
}

// verifyReplicate holds Replicate to the full path: where the copy
// succeeds, placing the pods one by one on dstNode must fit every pod and
// give each the devices the copy gives it. Both run on forks, undone.
func (eng *Engine) verifyReplicate(srcNode string, srcPods []*v1.Pod, dstNode string, pods []*v1.Pod) {
	copied := make([][]string, len(pods))
	eng.snap.Fork()
	err := eng.replicateAll(srcNode, srcPods, dstNode, pods)
	for i := range pods {
		if placed, _, ok := eng.snap.Pod(pods[i].UID); ok && err == nil {
			copied[i] = eng.devicesOf(placed)
		}
	}
	eng.snap.Revert()
	if err != nil {
		return // the copy refuses: nothing is placed, nothing to compare
	}
	eng.snap.Fork()
	defer eng.snap.Revert()
	for i, pod := range pods {
		placed, ferr := eng.Place(pod, dstNode)
		if ferr != nil {
			ShortcutDiffers("Replicate", "pod %s was copied onto node %s, which the scheduler's plugins reject: %s", podKey(pod), dstNode, ferr.Error())
		}
		if got := eng.devicesOf(placed); !slices.Equal(got, copied[i]) {
			ShortcutDiffers("Replicate", "pod %s was copied onto node %s with devices %v, the scheduler's plugins give it %v", podKey(pod), dstNode, copied[i], got)
		}
	}
}

// devicesOf lists the devices a placed pod's claims hold, sorted.
func (eng *Engine) devicesOf(pod *v1.Pod) []string {
	var out []string
	for _, c := range eng.ClaimsOf(pod) {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out = append(out, r.Request+"="+r.Driver+"/"+r.Pool+"/"+r.Device)
		}
	}
	slices.Sort(out)
	return out
}
