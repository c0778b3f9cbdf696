// Wrapper module for govmomi's govc, used by the vsphere platform's tests (never shipped).
// govmomi's own govc command is a module the Go module proxy does not serve, so main.go
// registers the commands of govmomi's cli packages directly. Same govmomi as vcsim.
module provisioner.dev/embedded/govc

go 1.26.0

require github.com/vmware/govmomi v0.55.1

require (
	github.com/a8m/tree v0.0.0-20240104212747-2c8764a5f17e // indirect
	github.com/dougm/pretty v0.0.0-20160325215624-add1dbc86daf // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
)
