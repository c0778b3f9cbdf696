// Command registry is the CNCF distribution registry (github.com/distribution/distribution/v3,
// upstream's `registry serve <config.yml>`), for provisioner's tests of pushing the provider
// images to a registry a user names. Upstream's cmd/registry also links the cloud storage
// drivers (S3, GCS, Azure), the pull-through proxy and token auth; the tests need only a
// directory (filesystem), memory (inmemory) and htpasswd, so this main registers those.
// Test-only, never shipped.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// Execute reports its own errors and exits non-zero on them (upstream's main does the same).
	_ = registry.RootCmd.Execute()
}
