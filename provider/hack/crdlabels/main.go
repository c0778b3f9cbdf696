// Command crdlabels adds the labels clusterctl (and provisioner's pivot) look for to
// every CRD in a directory: controller-gen writes no labels.
//
//	go run ./hack/crdlabels config/crd
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// labels: clusterctl.cluster.x-k8s.io marks a CRD whose objects a move takes;
// cluster.x-k8s.io/provider names the provider they belong to.
var labels = map[string]string{
	"clusterctl.cluster.x-k8s.io": "",
	"cluster.x-k8s.io/provider":   "agent-provisioner",
}

// contractLabels go on the CRDs of one group only: Cluster API's core reads
// cluster.x-k8s.io/<contract version> on a referenced infrastructure CRD to learn which
// of its versions implements the v1beta2 contract (and refuses a CRD without it).
var contractLabels = map[string]map[string]string{
	"infrastructure.provisioner.dev": {"cluster.x-k8s.io/v1beta2": "v1alpha1"},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdlabels DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no CRDs in %s", os.Args[1])
	}
	for _, file := range files {
		if err != nil {
			break
		}
		err = label(file)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdlabels:", err)
		os.Exit(1)
	}
}

func label(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	meta, _ := crd["metadata"].(map[string]any)
	if meta == nil {
		return fmt.Errorf("%s: no metadata", file)
	}
	existing, _ := meta["labels"].(map[string]any)
	if existing == nil {
		existing = map[string]any{}
	}
	for k, v := range labels {
		existing[k] = v
	}
	spec, _ := crd["spec"].(map[string]any)
	group, _ := spec["group"].(string)
	for k, v := range contractLabels[group] {
		existing[k] = v
	}
	meta["labels"] = existing
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte("---\n"), out...), 0o644)
}
