// draxr-image packs statically linked binaries into OCI images with no
// base image (see test/images): make images runs it on draxr's shipped
// binaries. It is a build tool, not shipped.
//
//	draxr-image -out bin/images -registry draxr.dev -version 0.1.0 -source URL BINARY...
package main

import (
	"flag"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"draxr.dev/draxr/test/images"
)

func main() {
	out := flag.String("out", "bin/images", "output folder (replaced): an OCI layout in oci/ and NAME.tar per image")
	registry := flag.String("registry", "draxr.dev", "registry part of the image references")
	version := flag.String("version", "", "image tag and org.opencontainers.image.version")
	source := flag.String("source", "", "org.opencontainers.image.source")
	flag.Parse()
	if err := run(*out, *registry, *version, *source, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "draxr-image:", err)
		os.Exit(1)
	}
}

func run(out, registry, version, source string, binaries []string) error {
	if len(binaries) == 0 {
		return fmt.Errorf("no binaries given")
	}
	var specs []images.Spec
	var imgs []v1.Image
	for _, b := range binaries {
		s := images.Spec{Binary: b, Registry: registry, Version: version, Source: source}
		img, err := images.Build(s)
		if err != nil {
			return err
		}
		specs, imgs = append(specs, s), append(imgs, img)
	}
	if err := images.Write(out, specs, imgs); err != nil {
		return err
	}
	for i, s := range specs {
		d, err := imgs[i].Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", s.Ref(), d)
	}
	return nil
}
