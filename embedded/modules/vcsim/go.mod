// Wrapper module for the vCenter API simulator used by the vsphere platform's tests
// (never shipped). govmomi's own vcsim command is a module the Go module proxy does
// not serve, so main.go wraps govmomi's simulator packages directly.
module provisioner.dev/embedded/vcsim

go 1.26.0

require github.com/vmware/govmomi v0.55.1

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/text v0.38.0 // indirect
)
