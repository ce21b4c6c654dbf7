package cloudprovider

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorClassAndCode(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantClass ErrorClass
		wantCode  string
		wantOOR   bool
		wantText  string
	}{
		{"quota", OutOfResources("QUOTA_EXCEEDED", "group %s: no quota for %d nodes", "gpu", 3),
			OutOfResourcesErrorClass, "QUOTA_EXCEEDED", true, "OutOfResource.QUOTA_EXCEEDED: group gpu: no quota for 3 nodes"},
		{"wrapped quota", fmt.Errorf("scale up: %w", OutOfResources("STOCKOUT", "zone a")),
			OutOfResourcesErrorClass, "STOCKOUT", true, "scale up: OutOfResource.STOCKOUT: zone a"},
		{"other typed", NewError(OtherErrorClass, "API_ERROR", "timeout"), OtherErrorClass, "API_ERROR", false, "Other.API_ERROR: timeout"},
		{"untyped", errors.New("boom"), OtherErrorClass, DefaultErrorCode, false, "boom"},
		{"typed without code", NewError(OtherErrorClass, "", "x"), OtherErrorClass, DefaultErrorCode, false, "Other.: x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassOf(tc.err); got != tc.wantClass {
				t.Errorf("ClassOf = %v, want %v", got, tc.wantClass)
			}
			if got := CodeOf(tc.err); got != tc.wantCode {
				t.Errorf("CodeOf = %q, want %q", got, tc.wantCode)
			}
			if got := IsOutOfResources(tc.err); got != tc.wantOOR {
				t.Errorf("IsOutOfResources = %v, want %v", got, tc.wantOOR)
			}
			if got := tc.err.Error(); got != tc.wantText {
				t.Errorf("Error() = %q, want %q", got, tc.wantText)
			}
		})
	}
	if IsOutOfResources(nil) {
		t.Error("IsOutOfResources(nil) = true")
	}
}
