package auditlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadCountsOneUsersRequestsFromAnOffset(t *testing.T) {
	const other = "system:serviceaccount:kube-system:other"
	line := func(user, verb, resource, sub string) string {
		ref := `"objectRef":{"resource":"` + resource + `","subresource":"` + sub + `"},`
		if resource == "" {
			ref = ""
		}
		return `{"kind":"Event","stage":"ResponseComplete","verb":"` + verb + `",` + ref + `"user":{"username":"` + user + `"}}` + "\n"
	}
	before := line(AutoscalerUser, "list", "nodes", "")
	after := line(AutoscalerUser, "list", "machines", "") + line(AutoscalerUser, "watch", "nodes", "") +
		line(AutoscalerUser, "update", "machinedeployments", "scale") + line(AutoscalerUser, "get", "", "") +
		line(other, "list", "nodes", "") + "not json\n"
	path := filepath.Join(t.TempDir(), "audit.log")
	// A partial last line is not counted and not passed.
	if err := os.WriteFile(path, []byte(before+after+`{"verb":"list"`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, next, err := Read(path, int64(len(before)), AutoscalerUser)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(before + after)); next != want {
		t.Errorf("next = %d, want %d (after the last whole line)", next, want)
	}
	if end, _ := End(path); end != next {
		t.Errorf("End = %d, want %d", end, next)
	}
	if got, want := c.String(), "get=1, list machines=1, update machinedeployments/scale=1, watch nodes=1"; got != want {
		t.Errorf("counts = %s, want %s", got, want)
	}
	if got, want := PerLoop(c.ByVerb, 2), "get=0.5,list=0.5,update=0.5,watch=0.5"; got != want {
		t.Errorf("PerLoop = %s, want %s", got, want)
	}
	err = c.NoLists(3)
	if err == nil || !strings.Contains(err.Error(), "list machines=1 (all its requests: get=1, list machines=1,") {
		t.Errorf("NoLists = %v, want the LIST of machines named", err)
	}
	if err := c.NoLists(3, "nodes", "resourceslices"); err != nil {
		t.Errorf("NoLists(nodes, resourceslices) = %v, want nil (nodes were watched, not listed)", err)
	}
}

func TestPolicyNamesItsUsers(t *testing.T) {
	p := Policy(AutoscalerUser, "b")
	if !strings.Contains(p, `users: ["`+AutoscalerUser+`", "b"]`) || !strings.HasSuffix(p, "- level: None\n") {
		t.Errorf("policy:\n%s", p)
	}
}
