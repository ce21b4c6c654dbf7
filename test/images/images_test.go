package images

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

// checkImage reads an image's config and layers as a runtime would and
// checks what matters when it runs: entrypoint, non-root user, labels, a
// static executable at the entrypoint.
func checkImage(t *testing.T, img v1.Image, s Spec) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/" + s.Name()}) {
		t.Errorf("%s: entrypoint %v", s.Name(), c.Entrypoint)
	}
	if c.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", s.Name(), c.User)
	}
	for k, want := range map[string]string{LabelSource: s.Source, LabelVersion: s.Version, LabelTitle: s.Name()} {
		if c.Labels[k] != want {
			t.Errorf("%s: label %s = %q, want %q", s.Name(), k, c.Labels[k], want)
		}
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("%s: platform %s/%s", s.Name(), cf.OS, cf.Architecture)
	}
	mt, err := img.MediaType()
	if err != nil || mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("%s: manifest media type %s (%v)", s.Name(), mt, err)
	}
	files, err := Files(img)
	if err != nil {
		t.Fatal(err)
	}
	bin, ok := files[s.Name()]
	if !ok {
		t.Fatalf("%s: no /%s in the layers (have %d files)", s.Name(), s.Name(), len(files))
	}
	if bin.Mode&0o111 == 0 || bin.UID != 0 || bin.Mode&0o022 != 0 {
		t.Errorf("%s: /%s mode %o uid %d: want root-owned, executable, not writable by others", s.Name(), s.Name(), bin.Mode, bin.UID)
	}
	arch, err := StaticELF("/"+s.Name(), bin.Data)
	if err != nil {
		t.Error(err)
	} else if arch != cf.Architecture {
		t.Errorf("%s: binary is %s, config says %s", s.Name(), arch, cf.Architecture)
	}
	if local, err := os.ReadFile(s.Binary); err == nil && string(local) != string(bin.Data) {
		t.Errorf("%s: the image's binary differs from %s", s.Name(), s.Binary)
	}
	// Another chart's command for the same binary (CA's ./cluster-autoscaler
	// from the working directory) finds it.
	for _, a := range s.Aliases() {
		if f, ok := files[a]; !ok || f.Link != s.Name() || c.WorkingDir != "/" {
			t.Errorf("%s: ./%s from working directory %q is %+v, want a link to %s", s.Name(), a, c.WorkingDir, f.Link, s.Name())
		}
	}
}

// checkWritten reads every image back from the OCI layout and from its
// tarball (as docker load would) and checks both are the image built.
func checkWritten(t *testing.T, dir string, specs []Spec) {
	t.Helper()
	for _, s := range specs {
		fromLayout, err := FromLayout(filepath.Join(dir, "oci"), s.Ref())
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, fromLayout, s)
		tag, err := name.NewTag(s.Ref())
		if err != nil {
			t.Fatal(err)
		}
		fromTar, err := tarball.ImageFromPath(filepath.Join(dir, s.Name()+".tar"), &tag)
		if err != nil {
			t.Fatalf("%s.tar: %v", s.Name(), err)
		}
		a, err := fromLayout.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		b, err := fromTar.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s: layout config %s, tarball config %s", s.Name(), a, b)
		}
	}
}

// A small static Go program packed, written and read back; building it
// twice gives the same digest.
func TestBuildStatic(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "hello")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Dir = dir // outside the module: a plain file build
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := Spec{Binary: bin, Registry: "registry.example", Version: "1.2.3", Source: "https://example.org/src"}
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one binary: %s and %s", d1, d2)
	}
	out := filepath.Join(dir, "images")
	if err := Write(out, []Spec{s}, []v1.Image{img}); err != nil {
		t.Fatal(err)
	}
	checkWritten(t, out, []Spec{s})
	// The autoscaler's image also answers to the Cluster Autoscaler's
	// command.
	ca := Spec{Binary: filepath.Join(dir, "bin", "draxr-autoscaler"), Registry: "registry.example", Version: "1.2.3", Source: "https://example.org/src"}
	if err := os.Rename(bin, ca.Binary); err != nil {
		t.Fatal(err)
	}
	caImg, err := Build(ca)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(caImg)
	if err != nil {
		t.Fatal(err)
	}
	if f := files["cluster-autoscaler"]; f.Link != "draxr-autoscaler" {
		t.Errorf("draxr-autoscaler image: /cluster-autoscaler is %+v, want a link to draxr-autoscaler", f)
	}
	checkImage(t, caImg, ca)
	if _, err := FromLayout(filepath.Join(out, "oci"), "registry.example/other:1.2.3"); err == nil || !strings.Contains(err.Error(), "no image registry.example/other:1.2.3") {
		t.Errorf("missing image: err = %v", err)
	}
}

// A dynamically linked binary has nothing to load it in an image with no
// base: it is refused, naming the file and the fix.
func TestBuildRefusesDynamic(t *testing.T) {
	for _, p := range []string{"/bin/ls", "/usr/bin/env"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if arch, err := StaticBinary(p); err == nil {
			t.Skipf("%s is static here (%s)", p, arch)
		}
		_, err := Build(Spec{Binary: p, Registry: "r", Version: "1", Source: "s"})
		if err == nil || !strings.Contains(err.Error(), p+": dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Fatalf("err = %v", err)
		}
		return
	}
	t.Skip("no dynamically linked binary to try")
}

// Not an executable at all.
func TestBuildRefusesNonELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(Spec{Binary: p, Registry: "r", Version: "1", Source: "s"}); err == nil || !strings.Contains(err.Error(), p+": not an ELF executable") {
		t.Fatalf("err = %v", err)
	}
}

// make images (run here, outside -short) gives one image per shipped
// binary, tagged with the chart's appVersion.
func TestShippedImages(t *testing.T) {
	// A static (CGO_ENABLED=0) build of the Kubernetes dependencies is a
	// cache of its own, a full cold build: CI runs it through make
	// images-check, apart from make test.
	if testing.Short() || os.Getenv("DRAXR_IMAGES") == "" {
		t.Skip("builds the shipped static binaries: make images-check (DRAXR_IMAGES=1)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("make", "-s", "-C", root, "images").CombinedOutput(); err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	chartYAML, err := os.ReadFile(filepath.Join(root, "charts", "draxr", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chartYAML, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %q %v", chart.AppVersion, err)
	}
	var specs []Spec
	for _, n := range []string{"draxr", "draxr-autoscaler", "draxr-scheduler", "draxr-example-driver"} {
		specs = append(specs, Spec{Binary: filepath.Join(root, "bin", "static", n), Registry: "draxr.dev",
			Version: chart.AppVersion, Source: "https://draxr.dev/draxr"})
	}
	dir := filepath.Join(root, "bin", "images")
	checkWritten(t, dir, specs)
	idx, err := os.ReadFile(filepath.Join(dir, "oci", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index struct{ Manifests []json.RawMessage }
	if err := json.Unmarshal(idx, &index); err != nil || len(index.Manifests) != len(specs) {
		t.Errorf("OCI layout index has %d images, want %d (%v)", len(index.Manifests), len(specs), err)
	}
}
