// Package devicepools reads a node's DRA devices as hardware: its
// ResourceSlices grouped into pools (newest generation, as the allocator
// keeps them), shared counter sets (KEP-4815) and what allocated devices
// consume from them, whole devices and partitions per DeviceClass, pool
// utilization, and the counter problems a slice can have. dynres builds
// on it to say which extended resources a node offers.
package devicepools
