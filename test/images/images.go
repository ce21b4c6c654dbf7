// Package images packs draxr's static binaries into OCI images with no
// base image (make images) and reads them back for the tests. Nothing is
// pulled: each image is one layer holding the binary, run as a non-root
// user through its entrypoint.
package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the numeric user and group the images run as (distroless's
// "nonroot"); numeric, since there is no /etc/passwd to resolve a name.
const User = "65532:65532"

// OCI label (annotation) keys the images carry in their config.
const (
	LabelSource  = "org.opencontainers.image.source"
	LabelVersion = "org.opencontainers.image.version"
	LabelTitle   = "org.opencontainers.image.title"
	// RefName names an image inside an OCI layout (tools such as skopeo
	// select it with oci:DIR:REF).
	RefName = "org.opencontainers.image.ref.name"
)

// Spec is one image to build.
type Spec struct {
	Binary   string // path of a statically linked binary; its base name is the image's name
	Registry string // e.g. draxr.dev; the image is Registry/Name:Version
	Version  string
	Source   string // the source repository's URL
}

// Name is the image's (and the binary's) name.
func (s Spec) Name() string { return filepath.Base(s.Binary) }

// Aliases are other names the binary answers to in the image, symbolic
// links at the root: draxr-autoscaler's image runs under the Cluster
// Autoscaler chart's command, ./cluster-autoscaler from the working
// directory /, so that switching is one image value.
func (s Spec) Aliases() []string {
	if s.Name() == "draxr-autoscaler" {
		return []string{"cluster-autoscaler"}
	}
	return nil
}

// Ref is the image's reference, Registry/Name:Version.
func (s Spec) Ref() string { return s.Registry + "/" + s.Name() + ":" + s.Version }

// Build makes the image: one layer with the binary at /NAME (root-owned,
// 0755) and an empty /tmp, no base image, entrypoint /NAME, user User,
// the OCI labels, and a fixed creation time so equal inputs give equal
// digests.
func Build(s Spec) (v1.Image, error) {
	if s.Version == "" || s.Registry == "" || s.Source == "" {
		return nil, fmt.Errorf("image %s: registry, version and source must be set", s.Name())
	}
	arch, err := StaticBinary(s.Binary)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := layerTar(s.Name(), bin, s.Aliases())
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Name(), err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", s.Name(), err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Name(), err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + s.Name()},
		User:       User,
		WorkingDir: "/",
		Labels: map[string]string{
			LabelSource: s.Source, LabelVersion: s.Version, LabelTitle: s.Name(),
		},
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar is the single layer: /tmp (some libraries write temporary
// files), the binary and its aliases.
func layerTar(name string, bin []byte, aliases []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, a := range aliases {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: name, Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// StaticBinary checks that path is a statically linked Linux ELF
// executable (no PT_INTERP program header: nothing to load it with in an
// image without a base) and returns its Go architecture name.
func StaticBinary(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	return staticELF(path, f)
}

func staticELF(what string, f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(p.Open())
			return "", fmt.Errorf("%s: dynamically linked (PT_INTERP %s); build it with CGO_ENABLED=0", what, bytes.TrimRight(interp, "\x00"))
		}
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("%s: ELF type %s, want an executable", what, f.Type)
	}
	arch, ok := map[elf.Machine]string{
		elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_386: "386", elf.EM_ARM: "arm",
		elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x", elf.EM_RISCV: "riscv64",
	}[f.Machine]
	if !ok {
		return "", fmt.Errorf("%s: ELF machine %s has no Go architecture here", what, f.Machine)
	}
	return arch, nil
}

// Write stores the images in an OCI image layout at dir/oci (each named by
// its reference in RefName) and each as a tarball dir/NAME.tar that
// docker load, crane push and kind load image-archive read. dir is
// replaced.
func Write(dir string, specs []Spec, imgs []v1.Image) error {
	if len(specs) != len(imgs) {
		return fmt.Errorf("%d specs for %d images", len(specs), len(imgs))
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(filepath.Join(dir, "oci"), empty.Index)
	if err != nil {
		return err
	}
	for i, s := range specs {
		if err := p.AppendImage(imgs[i], layout.WithAnnotations(map[string]string{RefName: s.Ref()})); err != nil {
			return fmt.Errorf("image %s: OCI layout: %w", s.Name(), err)
		}
		tag, err := name.NewTag(s.Ref())
		if err != nil {
			return fmt.Errorf("image %s: %w", s.Name(), err)
		}
		if err := tarball.WriteToFile(filepath.Join(dir, s.Name()+".tar"), tag, imgs[i]); err != nil {
			return fmt.Errorf("image %s: tarball: %w", s.Name(), err)
		}
	}
	return nil
}

// FromLayout reads the image named ref from the OCI layout at dir.
func FromLayout(dir, ref string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range m.Manifests {
		if d.Annotations[RefName] == ref {
			return idx.Image(d.Digest)
		}
		names = append(names, d.Annotations[RefName])
	}
	return nil, fmt.Errorf("%s: no image %s (has %v)", dir, ref, names)
}

// File is a regular file found in an image's layers.
type File struct {
	Mode     int64
	UID, GID int
	Data     []byte
	// Link is a symbolic link's target.
	Link string
}

// Files reads every regular file, directory and symbolic link of the image's layers,
// keyed by path without a leading slash (directories with a trailing one,
// Data nil); later layers win.
func Files(img v1.Image) (map[string]File, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	out := map[string]File{}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				return nil, fmt.Errorf("layer %d: %w", i, err)
			}
			f := File{Mode: h.Mode, UID: h.Uid, GID: h.Gid, Link: h.Linkname}
			if h.Typeflag == tar.TypeReg {
				if f.Data, err = io.ReadAll(tr); err != nil {
					rc.Close()
					return nil, fmt.Errorf("layer %d: %s: %w", i, h.Name, err)
				}
			}
			out[h.Name] = f
		}
		rc.Close()
	}
	return out, nil
}

// StaticELF is StaticBinary for a binary read from an image.
func StaticELF(what string, data []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("%s: not an ELF executable: %w", what, err)
	}
	return staticELF(what, f)
}
