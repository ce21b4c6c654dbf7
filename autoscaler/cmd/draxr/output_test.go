package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// -o json and -o yaml say what they are, as a Kubernetes object does.
func TestOutputsCarryAPIVersionAndKind(t *testing.T) {
	for cmd, kind := range map[string]string{"simulate": "Plan", "capacity": "CapacityReport", "doctor": "DoctorReport"} {
		for _, format := range []string{"json", "yaml"} {
			t.Run(cmd+"/"+format, func(t *testing.T) {
				code, out, errOut := draxr(t, cmd, "-o", format)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				var meta struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
				}
				if err := yaml.Unmarshal([]byte(out), &meta); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				if meta.APIVersion != "draxr.dev/v1alpha1" || meta.Kind != kind {
					t.Errorf("apiVersion %q, kind %q; want draxr.dev/v1alpha1, %s", meta.APIVersion, meta.Kind, kind)
				}
			})
		}
	}
}

// A CEL error quotes "<input>": JSON prints it as written, not as the
// \u003c escapes of HTML-safe JSON.
func TestJSONNotHTMLEscaped(t *testing.T) {
	code, out, errOut := draxr(t, "simulate", "-o", "json", "-f", filepath.Join(scenarios, "broken-cel-device-class", "input"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "ERROR: <input>:1:17") || strings.Contains(out, `\u003c`) {
		t.Errorf("want <input> as written and no \\u003c:\n%s", out)
	}
	var plan struct {
		ClassErrors []string `json:"deviceClassErrors"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.ClassErrors) != 1 || !strings.Contains(plan.ClassErrors[0], "<input>") {
		t.Errorf("deviceClassErrors = %q (%v), want the CEL error quoting <input>", plan.ClassErrors, err)
	}
}

// -f - reads stdin, as kubectl's does, for every command that takes -f;
// an error names it "stdin".
func TestFilenameDashReadsStdin(t *testing.T) {
	example, err := os.ReadFile("../../../simulator/examples/builtin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for cmd, kind := range map[string]string{"simulate": "Plan", "capacity": "CapacityReport", "doctor": "DoctorReport"} {
		t.Run(cmd, func(t *testing.T) {
			p := draxrProcess(t, cmd, "-f", "-", "-o", "yaml")
			p.Stdin = bytes.NewReader(example)
			var stderr bytes.Buffer
			p.Stderr = &stderr
			out, err := p.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			if !strings.Contains(string(out), "kind: "+kind+"\n") {
				t.Errorf("output is not a %s:\n%s", kind, out)
			}
			if strings.Contains(stderr.String(), "built-in example") {
				t.Errorf("planned the built-in example instead of stdin: %s", stderr.String())
			}

			p = draxrProcess(t, cmd, "-f", "-")
			p.Stdin = strings.NewReader("apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n")
			stderr.Reset()
			p.Stderr = &stderr
			err = p.Run()
			if p.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "stdin") || !strings.Contains(stderr.String(), `"Gadget"`) {
				t.Errorf("bad stdin: %v, stderr %q; want exit 2 naming stdin and the kind", err, stderr.String())
			}
		})
	}
}
