//go:build draxrverify

package placement

import "os"

// verifyBuilt: this test build honours VerifyShortcutsEnv.
const verifyBuilt = true

func verifyEnabled() bool { return os.Getenv(VerifyShortcutsEnv) != "" }
