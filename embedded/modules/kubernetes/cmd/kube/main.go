// Command kube is the Kubernetes components in one multi-call executable, as hyperkube
// was before Kubernetes 1.19 and as k3s ships them: kube-apiserver, kubelet, kubeadm,
// kube-controller-manager, kube-scheduler and kube-proxy share one Go runtime, one copy of
// client-go, apimachinery and the API types, and one link.
//
// It runs the component named by the base name it is called by (a link named kubelet, or
// a process started with argv[0] kube-apiserver), or else by its first argument
// (`kube kubeadm init ...`). Each component is its own upstream command, run as that
// component's main runs it (k8s.io/component-base/cli.Run; kubeadm's app.Run), so its
// flags, help and `--version` are upstream's.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	_ "time/tzdata" // kube-apiserver and kube-controller-manager: CronJob time zones

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration

	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// components maps each component's name to its upstream main; each returns the exit code.
var components = map[string]func() int{
	"kube-apiserver":          func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kube-proxy":              func() int { return cli.Run(proxy.NewProxyCommand()) },
	"kubelet":                 func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	// kubeadm's main: errors are printed and turned into its exit codes by HandleError, which exits.
	"kubeadm": func() int { kubeadmerrors.HandleError(kubeadm.Run()); return 0 },
}

func main() {
	if run, ok := components[filepath.Base(os.Args[0])]; ok {
		os.Exit(run())
	}
	if len(os.Args) > 1 {
		if run, ok := components[os.Args[1]]; ok {
			// The component sees itself as argv[0] and its own arguments after it, as when called by its name.
			os.Args = os.Args[1:]
			os.Exit(run())
		}
	}
	usage(os.Args[1:])
}

// usage explains how to call a component; exit 0 for -h/--help/help, 2 otherwise.
func usage(args []string) {
	names := make([]string, 0, len(components))
	for name := range components {
		names = append(names, name)
	}
	sort.Strings(names)
	text := "kube runs one Kubernetes component, chosen by the name it is called by or by its first argument:\n\n" +
		"  kube <component> [flags]        e.g. kube kube-apiserver --version\n" +
		"  <component> [flags]             through a link named like the component (ln -s kube kubelet)\n\n" +
		"Components: " + strings.Join(names, ", ") + "\n" +
		"Each one's own help: kube <component> --help\n"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(os.Stdout, text)
		os.Exit(0)
	}
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n\n", args[0])
	} else {
		fmt.Fprintf(os.Stderr, "kube: no component named (called as %q)\n\n", filepath.Base(os.Args[0]))
	}
	fmt.Fprint(os.Stderr, text)
	os.Exit(2)
}
