package hostplan

import (
	"strings"
	"testing"

	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

func TestPrepareDownloadsArtifactsThenRunsItsCommands(t *testing.T) {
	artifacts := []infrav1.Artifact{{Path: "/usr/local/bin/kubelet", URL: "http://198.18.0.1:8081/kubelet", Digest: "sha256:" + strings.Repeat("a", 64), Mode: "0755"}}
	spec := Prepare(artifacts, []string{`for f in /var/lib/provisioner/images/*.tar; do ctr images import "$f"; done`})

	if len(spec.PreflightChecks) != len(PreflightChecks) {
		t.Errorf("%d preflight checks, want the bootstrap plan's %d", len(spec.PreflightChecks), len(PreflightChecks))
	}
	if len(spec.Files) != 1 {
		t.Fatalf("files %+v", spec.Files)
	}
	if f := spec.Files[0]; f.Path != "/usr/local/bin/kubelet" || f.ContentRef == nil || f.ContentRef.URL != artifacts[0].URL || f.ContentRef.Digest != artifacts[0].Digest || f.Mode != "0755" {
		t.Errorf("artifact: %+v", f)
	}
	if len(spec.Instructions) != 2 || spec.Instructions[0].Name != "check-ip-forward" {
		t.Fatalf("instructions %+v", spec.Instructions)
	}
	ins := spec.Instructions[1]
	if ins.Name != "prepare-1-for-f" || ins.Command != "/bin/sh" || ins.Args[0] != "-c" || !strings.Contains(ins.Args[1], "ctr images import") || !ins.SaveOutput {
		t.Errorf("command: %+v", ins)
	}
	if spec.RetryStrategy == nil || spec.RetryStrategy.MaxAttempts < 2 {
		t.Errorf("no retry: %+v", spec.RetryStrategy)
	}
}

func TestPrepareWithNothingToDoStillChecksTheHost(t *testing.T) {
	spec := Prepare(nil, nil)
	if len(spec.Instructions) != 1 || len(spec.Files) != 0 || len(spec.PreflightChecks) == 0 {
		t.Errorf("%+v", spec)
	}
}
