//go:build !draxrverify

package placement

// verifyBuilt: a build without -tags draxrverify, as every shipped binary
// is, holds shortcuts to nothing and reads no environment variable.
const verifyBuilt = false

func verifyEnabled() bool { return false }
