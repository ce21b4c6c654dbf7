package placement

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// requestMappings rebuilds pod.status.extendedResourceClaimStatus
// .requestMappings for an extended-resource claim, as the scheduler's
// PreBind writes them (the plugin keeps them in unexported state). Requests
// are named container-<i>-request-<j>: i indexes init containers then
// containers, j the container's sorted request names. Long-lived containers
// map to their own request; a non-sidecar init container first reuses the
// devices of long-lived containers that start after it, then the one
// request shared by all such init containers.
func requestMappings(pod *v1.Pod, claim *resourceapi.ResourceClaim) ([]v1.ContainerExtendedResourceRequest, error) {
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	numInit := len(pod.Spec.InitContainers)
	isShortLived := func(i int) bool {
		c := containers[i]
		return i < numInit && (c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways)
	}

	// Which resources the claim covers, and each request's count.
	counts := map[string]int64{}
	var resources []v1.ResourceName
	for _, req := range claim.Spec.Devices.Requests {
		i, j, err := parseRequestName(req.Name)
		if err != nil || i >= len(containers) {
			return nil, fmt.Errorf("extended-resource claim %s: request %q does not name a container of pod %s", claim.Name, req.Name, podKey(pod))
		}
		keys := sortedRequestNames(&containers[i])
		if j >= len(keys) {
			return nil, fmt.Errorf("extended-resource claim %s: request %q does not name a resource of container %s", claim.Name, req.Name, containers[i].Name)
		}
		if req.Exactly != nil {
			counts[req.Name] = req.Exactly.Count
		}
		if !slices.Contains(resources, keys[j]) {
			resources = append(resources, keys[j])
		}
	}
	slices.Sort(resources)

	var out []v1.ContainerExtendedResourceRequest
	for _, rName := range resources {
		var short []v1.ContainerExtendedResourceRequest
		sharedShort := "" // the one request left for short-lived containers
		for i := range containers {
			if name := requestNameFor(&containers[i], i, rName); isShortLived(i) && counts[name] > 0 {
				sharedShort = name
			}
		}
		for i := range containers {
			q := quantity(&containers[i], rName)
			if q == 0 {
				continue
			}
			m := v1.ContainerExtendedResourceRequest{ContainerName: containers[i].Name, ResourceName: string(rName)}
			if !isShortLived(i) {
				m.RequestName = requestNameFor(&containers[i], i, rName)
				out = append(out, m)
				continue
			}
			var sum int64
			for k := i + 1; k < len(containers) && sum < q; k++ {
				if isShortLived(k) || quantity(&containers[k], rName) == 0 {
					continue
				}
				name := requestNameFor(&containers[k], k, rName)
				sum += counts[name]
				m.RequestName = name
				short = append(short, m)
			}
			if sum < q {
				m.RequestName = sharedShort
				short = append(short, m)
			}
		}
		out = append(out, short...)
	}
	return out, nil
}

func quantity(c *v1.Container, rName v1.ResourceName) int64 {
	q, ok := c.Resources.Requests[rName]
	if !ok {
		return 0
	}
	n, _ := q.AsInt64()
	return n
}

func sortedRequestNames(c *v1.Container) []v1.ResourceName {
	keys := make([]v1.ResourceName, 0, len(c.Resources.Requests))
	for k := range c.Resources.Requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func requestNameFor(c *v1.Container, i int, rName v1.ResourceName) string {
	j := slices.Index(sortedRequestNames(c), rName)
	if j < 0 {
		return ""
	}
	return fmt.Sprintf("container-%d-request-%d", i, j)
}

func parseRequestName(name string) (int, int, error) {
	rest, ok := strings.CutPrefix(name, "container-")
	if !ok {
		return 0, 0, fmt.Errorf("bad request name %q", name)
	}
	is, js, ok := strings.Cut(rest, "-request-")
	if !ok {
		return 0, 0, fmt.Errorf("bad request name %q", name)
	}
	i, err1 := strconv.Atoi(is)
	j, err2 := strconv.Atoi(js)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad request name %q", name)
	}
	return i, j, nil
}
