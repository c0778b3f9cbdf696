/**
 * Build-time source patches, applied by building against a patched copy of the module (nothing upstream is
 * copied into this repository: each rule rewrites a file of the pinned module, read
 * from the module cache, at build time). Each one exists for a reason the product
 * cannot meet otherwise; the build fails if a rule stops matching, so an upgrade
 * cannot silently drop one.
 */

export interface SourceEdit {
  /** Exact text to find in the file. */
  find: string;
  replace: string;
  /** How many times `find` must occur (default 1). */
  count?: number;
}

export interface SourcePatch {
  /** Module whose file is edited; resolved with `go list -m` in each wrapper that builds it. */
  module: string;
  /** File inside the module. */
  file: string;
  edits: readonly SourceEdit[];
  /** Why this patch exists. */
  why: string;
  /** The wrappers (embedded/modules/<name>) whose builds take it. Default: every wrapper whose graph has the module. */
  wrappers?: readonly string[];
}

/** A file added to a package of a module (the overlay creates it). */
export interface AddedFile {
  module: string;
  file: string;
  content: string;
  why: string;
  /** As SourcePatch.wrappers. Default: every wrapper whose graph has the module. */
  wrappers?: readonly string[];
}

/**
 * Every listener the providers open binds to PROVISIONER_BIND_ADDRESS (set to
 * 127.0.0.1 by the local control plane); unset keeps upstream behaviour.
 */
export const bindAddressEnv = 'PROVISIONER_BIND_ADDRESS';
/** Port of the in-memory provider's debug server (upstream: fixed 19000). 0 picks a free port. */
export const inMemoryDebugPortEnv = 'PROVISIONER_INMEMORY_DEBUG_PORT';
/**
 * Set to `true` in kube-apiserver's environment, it neither builds nor serves OpenAPI v2
 * (/openapi/v2), nor the CRDs' OpenAPI documents; /openapi/v3 keeps the built-in groups. Only
 * the local control plane sets it: the same binary is the hosts platform's workload API server
 * (a node image), which keeps upstream's.
 */
export const skipOpenApiV2Env = 'PROVISIONER_APISERVER_SKIP_OPENAPI_V2';

/**
 * The Go variable the Cluster API patch below adds, which capi-manager's
 * --reconcile-rate-limit-interval sets (embedded/modules/capi/main.go).
 */
export const rateLimitIntervalVariable = 'ProvisionerRateLimitInterval';

export const sourcePatches: readonly SourcePatch[] = [
  {
    module: 'sigs.k8s.io/controller-runtime',
    file: 'pkg/webhook/server.go',
    why: 'CAPI managers start their webhook server with no host, so it listens on every interface; a local control plane must listen on loopback only.',
    edits: [
      {
        find: 'listener, err := tls.Listen("tcp", net.JoinHostPort(s.Options.Host, strconv.Itoa(s.Options.Port)), cfg)',
        replace:
          `if s.Options.Host == "" {\n\t\ts.Options.Host = os.Getenv("${bindAddressEnv}")\n\t}\n` +
          '\tlistener, err := tls.Listen("tcp", net.JoinHostPort(s.Options.Host, strconv.Itoa(s.Options.Port)), cfg)',
      },
    ],
  },
  {
    module: 'sigs.k8s.io/cluster-api/test',
    file: 'infrastructure/inmemory/pkg/server/mux.go',
    why:
      'The in-memory provider serves simulated workload API servers and a debug server on every interface, the debug server on the fixed port 19000, ' +
      'so two local management clusters (a pivot source and target) could not run side by side; and it gives each workload cluster the next port of a fixed range ' +
      'without checking it, listening on it only when the first API server is added, seconds later, so two managers creating clusters at once could pick the same port; ' +
      'every manager starts that range at 20000, so a port another one\'s cluster needs again (restarted, or moved in by a pivot) is the first any of them takes while it is free; ' +
      'and an API server whose listen fails stays registered, so the machine controller (which adds one only when none is registered) never listens again.',
    edits: [
      {
        find: 'net.Listen("tcp", fmt.Sprintf(":%d", options.DebugPort))',
        replace: `net.Listen("tcp", provisionerListenAddress(options.DebugPort, "${inMemoryDebugPortEnv}"))`,
      },
      {
        // Each manager starts the range at its own place (a hash of its working directory, the
        // control plane's state dir), so the ports of two control planes' clusters lie apart, and
        // one picking a port does not reach a port the other's cluster needs again while it is
        // free (that cluster's manager restarting, or a pivot moving it in).
        find: '\t\tportIndex:                 options.MinPort,\n',
        replace: '\t\tportIndex:                 provisionerFirstPort(options.MinPort, options.MaxPort),\n',
      },
      {
        // A search that starts inside the range (below) wraps around at its end, before upstream's
        // "no more free ports" check, which the search itself makes when it has tried every port.
        find: '\tport := m.portIndex\n\tif port > m.maxPort {\n',
        replace: '\tport := m.portIndex\n\tif port > m.maxPort {\n\t\tport = m.minPort\n\t}\n\tif port > m.maxPort {\n',
      },
      {
        // Upstream leaves a TODO here: the next port is never checked. Two local management
        // clusters each run a mux over the same range, so the second one's first cluster
        // would be published on a port the first one serves. The port picked is held (a
        // listener kept open) until the cluster's listener starts on it, so no other process
        // can take it in between. The search tries each port of the range once, wrapping
        // around, and skips the ports of this mux's own clusters, which may not listen yet.
        // (fmt, not the errors package: v1.13 and v1.14 import that under different names.)
        find: '\t// TODO: check the port is actually free. If not try the next one\n\n\tm.portIndex++\n\treturn port, nil',
        replace:
          '\tfor tried := int32(0); tried <= m.maxPort-m.minPort; tried++ {\n' +
          '\t\tif port < m.minPort || port > m.maxPort {\n\t\t\tport = m.minPort\n\t\t}\n' +
          '\t\tif _, ours := m.workloadClusterNameByPort[fmt.Sprintf("%d", port)]; !ours && provisionerHoldPort(port) {\n' +
          '\t\t\tm.portIndex = port + 1\n\t\t\treturn port, nil\n\t\t}\n\t\tport++\n\t}\n' +
          '\treturn -1, fmt.Errorf("no more free ports in the %d-%d range", m.minPort, m.maxPort)',
      },
      {
        // The listener that held the port since it was picked is handed over.
        find: 'net.Listen("tcp", fmt.Sprintf(":%d", wcl.Port()))',
        replace: 'provisionerListen(wcl.Port())',
        count: 2,
      },
      {
        // An API server is registered before its cluster's listener starts, and the machine
        // controller adds one only when none is registered: a listen that fails (the port taken
        // by another program meanwhile) would leave the cluster unserved for good. Unregistered,
        // the next reconcile tries again, and the cluster is served once the port is free.
        // (After the edit above: AddAPIServer's listen is two tabs deep, StartListener's one.)
        find: 'provisionerListen(wcl.Port()) //nolint:noctx\n\t\tif err != nil {\n',
        replace: 'provisionerListen(wcl.Port()) //nolint:noctx\n\t\tif err != nil {\n\t\t\twcl.apiServers.Delete(podName)\n',
      },
      {
        // A cluster deleted before its first API server started releases the port it held.
        find: '\tdelete(m.workloadClusterNameByPort, fmt.Sprintf("%d", wcl.Port()))\n',
        replace: '\tdelete(m.workloadClusterNameByPort, fmt.Sprintf("%d", wcl.Port()))\n\tprovisionerReleasePort(wcl.Port())\n',
      },
    ],
  },
  {
    module: 'sigs.k8s.io/cluster-api',
    file: 'util/controller/builder.go',
    wrappers: ['capi'],
    why:
      'With the ReconcilerRateLimiting gate on (its default), Cluster API reconciles each object at most once a second, a floor no flag lowers: in a local control plane ' +
      'every reconcile that follows an object\'s own write (a finalizer, a condition, an owner reference) waited up to a second, about 5 s from the objects applied to the ' +
      'first host\'s plan (docs/benchmarks.md, "hosts"). Turning the gate off would also skip the cache consistency check that MachineSet and KubeadmControlPlane rely on, ' +
      'so the gate stays on and only its interval becomes a flag of capi-manager (a controller asking for a longer one still gets it). Only the capi wrapper takes it: ' +
      'its main is the one that sets the variable, and CAPA\'s and CAPV\'s builds stay as they are.',
    edits: [
      {
        find: '\trateLimitInterval := time.Second\n\tif blder.rateLimitInterval > time.Second {\n',
        replace: `\trateLimitInterval := ${rateLimitIntervalVariable}\n\tif blder.rateLimitInterval > rateLimitInterval {\n`,
      },
    ],
  },
  {
    module: 'k8s.io/kubernetes',
    file: 'pkg/controlplane/apiserver/config.go',
    why:
      'kube-apiserver builds OpenAPI v2 documents at start (the built-in spec, the aggregator\'s merge of its delegates\' specs) and, through the apiextensions ' +
      'OpenAPI controllers, a v2 and a v3 document of every CRD: about 45 MB of its heap in a local control plane (docs/architecture.md, "Footprint"), which nothing we ship reads. ' +
      `With ${skipOpenApiV2Env}=true the generic config carries no v2 OpenAPI config once authentication has read it, so neither kube-apiserver, apiextensions-apiserver ` +
      'nor the aggregator (each copies this config) installs /openapi/v2, and apiextensions starts no CRD OpenAPI controller (it starts them only beside a v2 spec). ' +
      '/openapi/v3 still serves the built-in groups, built on request, so kubectl finds the fieldValidation parameter there and validates on the server (without any OpenAPI, ' +
      'kubectl apply fails: "failed to download openapi"). Server-side apply keeps its type converters: built from the v3 config at API install time (built-in groups) and ' +
      'from each CRD\'s schema (CRDs), not from the served documents. Only kube-apiserver runs this code (kube-controller-manager links the package but never builds a server config).',
    edits: [
      {
        find: '\tgenericConfig.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")\n',
        replace:
          '\tgenericConfig.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")\n' +
          '\tif provisionerSkipOpenAPIV2() {\n\t\tgenericConfig.OpenAPIConfig = nil\n\t}\n',
      },
    ],
  },
];

export const addedFiles: readonly AddedFile[] = [
  {
    module: 'sigs.k8s.io/cluster-api/test',
    file: 'infrastructure/inmemory/pkg/server/provisioner_listen.go',
    why: 'Helper for the mux.go patch above.',
    content: `package server

import (
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"sync"
)

// provisionerListenAddress is the address a listener binds to: the host from
// ${bindAddressEnv} (empty keeps upstream's every-interface behaviour) and the port,
// overridden by the environment variable portEnv when it is named and set.
func provisionerListenAddress(port int32, portEnv string) string {
	if portEnv != "" {
		if v, err := strconv.ParseInt(os.Getenv(portEnv), 10, 32); err == nil {
			port = int32(v)
		}
	}
	return net.JoinHostPort(os.Getenv("${bindAddressEnv}"), strconv.Itoa(int(port)))
}

// provisionerFirstPort is where this process starts looking for a workload cluster's port in
// [min, max]: an FNV-1a hash of its working directory (a local control plane runs each manager
// in its own state directory), so two control planes' clusters get ports apart; min when the
// directory is unknown.
func provisionerFirstPort(min, max int32) int32 {
	dir, err := os.Getwd()
	if err != nil || max < min {
		return min
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(dir))
	return min + int32(h.Sum32()%uint32(max-min+1))
}

// provisionerHeld holds, by port, the listeners opened when a workload cluster's port was
// picked and not yet handed to that cluster's server.
var (
	provisionerHeldLock sync.Mutex
	provisionerHeld     = map[int32]net.Listener{}
)

// provisionerHoldPort listens on port and keeps the listener open until provisionerListen
// hands it over (or provisionerReleasePort closes it), so no other process can take the port
// between its pick and the cluster's first API server; false if the port is taken.
func provisionerHoldPort(port int32) bool {
	l, err := net.Listen("tcp", provisionerListenAddress(port, "")) //nolint:noctx
	if err != nil {
		return false
	}
	provisionerHeldLock.Lock()
	defer provisionerHeldLock.Unlock()
	if old, ok := provisionerHeld[port]; ok {
		_ = old.Close()
	}
	provisionerHeld[port] = l
	return true
}

// provisionerListen returns the listener held for port, or a new one when none is held (a
// port given with the cluster, as after a move, or a listener started again after a stop).
func provisionerListen(port int32) (net.Listener, error) {
	provisionerHeldLock.Lock()
	l, ok := provisionerHeld[port]
	delete(provisionerHeld, port)
	provisionerHeldLock.Unlock()
	if ok {
		return l, nil
	}
	return net.Listen("tcp", provisionerListenAddress(port, "")) //nolint:noctx
}

// provisionerReleasePort closes the listener held for port, if any.
func provisionerReleasePort(port int32) {
	provisionerHeldLock.Lock()
	defer provisionerHeldLock.Unlock()
	if l, ok := provisionerHeld[port]; ok {
		_ = l.Close()
		delete(provisionerHeld, port)
	}
}
`,
  },
  {
    module: 'sigs.k8s.io/cluster-api',
    file: 'util/controller/provisioner_interval.go',
    wrappers: ['capi'],
    why: 'The variable of the util/controller/builder.go patch above.',
    content: `package controller

import "time"

// ${rateLimitIntervalVariable} is how often at most a controller built here reconciles one
// object while the ReconcilerRateLimiting gate is on. Upstream's is a fixed second;
// provisioner's capi-manager sets it from --reconcile-rate-limit-interval before any
// controller is built.
var ${rateLimitIntervalVariable} = time.Second
`,
  },
  {
    module: 'k8s.io/kubernetes',
    file: 'pkg/controlplane/apiserver/provisioner_openapi.go',
    why: 'Helper for the pkg/controlplane/apiserver/config.go patch above.',
    content: `package apiserver

import "os"

// provisionerSkipOpenAPIV2 reports whether ${skipOpenApiV2Env} asks kube-apiserver not to
// build or serve OpenAPI v2 documents (nor the CRDs' documents); unset keeps upstream behaviour.
func provisionerSkipOpenAPIV2() bool {
	return os.Getenv("${skipOpenApiV2Env}") == "true"
}
`,
  },
];

/** The source patches and added files a wrapper's build takes for one module of its graph. */
export function patchesFor(wrapper: string, module: string): { patches: SourcePatch[]; added: AddedFile[] } {
  const takes = (p: SourcePatch | AddedFile) => p.module === module && (p.wrappers ?? [wrapper]).includes(wrapper);
  return { patches: sourcePatches.filter(takes), added: addedFiles.filter(takes) };
}
