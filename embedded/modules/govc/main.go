// Command govc is govmomi's vSphere CLI, built from the same govmomi module as the
// bundled vcsim, for the vsphere platform's tests: they list what the simulator holds
// (VMs, folders) after a destroy, and read a VM's extraConfig. govmomi's own govc command
// is a module the Go module proxy does not serve; its commands live in the govmomi
// module's cli packages, so this main registers the ones the tests use and runs them as
// govc does. Test-only, never shipped.
package main

import (
	"os"

	"github.com/vmware/govmomi/cli"

	_ "github.com/vmware/govmomi/cli/about"
	_ "github.com/vmware/govmomi/cli/folder"
	_ "github.com/vmware/govmomi/cli/object"
	_ "github.com/vmware/govmomi/cli/version"
	_ "github.com/vmware/govmomi/cli/vm"
)

func main() {
	os.Exit(cli.Run(os.Args[1:]))
}
