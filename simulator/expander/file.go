package expander

import (
	"fmt"
	"os"
)

// NewFromFile is New with the priority expander's config read from the
// file prioritiesPath ("" for none), as both CLIs' --expander-priorities
// give it.
func NewFromFile(name, prioritiesPath string, seed int64) (Strategy, error) {
	var priorities []byte
	if prioritiesPath != "" {
		var err error
		if priorities, err = os.ReadFile(prioritiesPath); err != nil {
			return nil, fmt.Errorf("--expander-priorities: %w", err)
		}
	}
	return New(name, priorities, seed)
}
