// Package crdsaws pins sigs.k8s.io/cluster-api-provider-aws/v2 in go.mod/go.sum
// so the bundle build can read its CRDs from the module cache, verified.
package crdsaws
