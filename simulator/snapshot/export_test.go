package snapshot

// DisableCycleScope makes the DRA listers ignore SetCycleScope, so tests
// can compare scoped and unscoped scheduling.
func DisableCycleScope(s *Snapshot) { s.unscoped = true }
