// Package version holds the build's version, set with
// -ldflags "-X provisioner.dev/provider/internal/version.Version=<v>".
package version

// Version of the manager and agent binaries. Default: "dev" (a build without ldflags).
var Version = "dev"
