// CoreDNS with the plugins a Kubernetes cluster's DNS uses: every plugin of kubeadm's
// default Corefile (errors, health, ready, kubernetes, prometheus, forward, cache, loop,
// reload, loadbalance) plus the ones people add to it (log, hosts, rewrite, template,
// whoami, autopath, k8s_external, ...). The cloud, etcd and DNSSEC-signing plugins of
// upstream's full build are left out: they pull in SDKs nodes never use.
//
// Custom build as CoreDNS documents it (coredns.io "Compile Time Enabling or Disabling
// Plugins" without a source checkout): set dnsserver.Directives and import the plugins.
// CoreDNS stamps nothing at build time for its version: `coredns -version` prints
// coremain.CoreVersion, a constant of the module ("CoreDNS-1.14.2").
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins, in the order of directives below.
	_ "github.com/coredns/coredns/plugin/acl"
	_ "github.com/coredns/coredns/plugin/any"
	_ "github.com/coredns/coredns/plugin/autopath"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/bufsize"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/cancel"
	_ "github.com/coredns/coredns/plugin/chaos"
	_ "github.com/coredns/coredns/plugin/debug"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/header"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/k8s_external"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/minimal"
	_ "github.com/coredns/coredns/plugin/nsid"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/root"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/timeouts"
	_ "github.com/coredns/coredns/plugin/tls"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// directives is the order plugins handle a query in: upstream's plugin.cfg (v1.14.2)
// with the plugins not built here removed. The order matters; do not sort it.
var directives = []string{
	"root",
	"metadata",
	"cancel",
	"tls",
	"timeouts",
	"reload",
	"nsid",
	"bufsize",
	"bind",
	"debug",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"any",
	"chaos",
	"loadbalance",
	"cache",
	"rewrite",
	"header",
	"acl",
	"autopath",
	"minimal",
	"template",
	"hosts",
	"k8s_external",
	"kubernetes",
	"file",
	"loop",
	"forward",
	"whoami",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
