package cloudprovider

import (
	"errors"
	"fmt"
)

// ErrorClass says what kind of failure a provider reported, as the
// Cluster Autoscaler's cloudprovider.InstanceErrorClass does. The class is
// recorded (backoff status, events, metrics); it does not change how long
// a group is backed off.
type ErrorClass int

const (
	// OutOfResourcesErrorClass: the provider has no capacity or quota
	// left for the group (stockout, quota exceeded).
	OutOfResourcesErrorClass ErrorClass = 1
	// OtherErrorClass is every other failure.
	OtherErrorClass ErrorClass = 99
)

// String is the class's name as CA prints it in ScaleUpFailed events.
func (c ErrorClass) String() string {
	switch c {
	case OutOfResourcesErrorClass:
		return "OutOfResource"
	case OtherErrorClass:
		return "Other"
	}
	return fmt.Sprintf("ErrorClass(%d)", int(c))
}

// Error is a provider failure with its class and a short machine-readable
// code (e.g. "QUOTA_EXCEEDED"); providers return it from IncreaseSize,
// DeleteNodes and the like.
type Error struct {
	Class ErrorClass
	Code  string
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s.%s: %v", e.Class, e.Code, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// NewError returns an Error of the class and code with a formatted message.
func NewError(class ErrorClass, code, format string, args ...any) error {
	return &Error{Class: class, Code: code, Err: fmt.Errorf(format, args...)}
}

// OutOfResources is shorthand for an OutOfResourcesErrorClass error.
func OutOfResources(code, format string, args ...any) error {
	return NewError(OutOfResourcesErrorClass, code, format, args...)
}

// DefaultErrorCode is the code CA records for a failed IncreaseSize that
// carries none.
const DefaultErrorCode = "cloudProviderError"

// ClassOf returns the class of a provider error; untyped errors are
// OtherErrorClass.
func ClassOf(err error) ErrorClass {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Class
	}
	return OtherErrorClass
}

// CodeOf returns the code of a provider error, DefaultErrorCode for an
// untyped one.
func CodeOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok && e.Code != "" {
		return e.Code
	}
	return DefaultErrorCode
}

// IsOutOfResources says whether err is (or wraps) an out-of-resources error.
func IsOutOfResources(err error) bool {
	return err != nil && ClassOf(err) == OutOfResourcesErrorClass
}

// InstanceState is where an instance is in its life, as CA's InstanceState.
type InstanceState int

const (
	// InstanceRunning: the machine exists and is (or will shortly be) a node.
	InstanceRunning InstanceState = 1
	// InstanceCreating: asked for, not yet a running machine.
	InstanceCreating InstanceState = 2
	// InstanceDeleting: being removed.
	InstanceDeleting InstanceState = 3
)

func (s InstanceState) String() string {
	switch s {
	case InstanceRunning:
		return "Running"
	case InstanceCreating:
		return "Creating"
	case InstanceDeleting:
		return "Deleting"
	}
	return fmt.Sprintf("InstanceState(%d)", int(s))
}

// InstanceErrorInfo says why an instance failed to come up.
type InstanceErrorInfo struct {
	ErrorClass   ErrorClass
	ErrorCode    string
	ErrorMessage string
}

// InstanceStatus is an instance's state and, for a failed one, why.
type InstanceStatus struct {
	State     InstanceState
	ErrorInfo *InstanceErrorInfo
}

// CodeMaxSizeExceeded is the code of an IncreaseSize refused because the
// group would grow past its max size.
const CodeMaxSizeExceeded = "MaxSizeExceeded"

// MaxSizeExceeded is every provider's error for IncreaseSize past the
// group's max size: typed, so the loop (and the conformance suite) can
// tell it from a cloud failure.
func MaxSizeExceeded(group string, target, delta, maxSize int) error {
	return NewError(OtherErrorClass, CodeMaxSizeExceeded, "node group %s: %d + %d nodes exceeds max size %d", group, target, delta, maxSize)
}
