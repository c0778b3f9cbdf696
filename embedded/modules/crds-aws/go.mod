// Pins the AWS infrastructure provider's module, from which the bundle takes only
// the CRDs (to validate AWS manifests against the real schema). Nothing is built,
// so nothing imports it: do not run `go mod tidy` here (it would drop the pin).
// go.sum holds the module's own checksums (`go mod download <module>`).
module provisioner.dev/embedded/crds-aws

go 1.26.0

require sigs.k8s.io/cluster-api-provider-aws/v2 v2.13.0
