import { describe, expect, it } from 'vitest';
import { binaryRecipes, builtFor, kubeComponents } from './recipe.js';

describe('binary recipes', () => {
  it('build the flannel binaries and e2e.test for Linux only, everything else for every target', () => {
    const names = (goos: 'linux' | 'darwin') => binaryRecipes.filter((r) => builtFor(r, { goos, goarch: 'arm64' })).map((r) => r.name);
    expect(names('linux')).toEqual(binaryRecipes.map((r) => r.name));
    expect(binaryRecipes.map((r) => r.name).filter((n) => !names('darwin').includes(n))).toEqual(['flanneld', 'flannel', 'e2e.test']);
  });

  it('ship the cluster add-ons and keep agnhost for tests', () => {
    const shipped = (name: string) => binaryRecipes.find((r) => r.name === name)?.shipped;
    expect(['coredns', 'flanneld', 'flannel'].map(shipped)).toEqual([true, true, true]);
    expect(shipped('agnhost')).toBe(false);
  });

  it('build e2e.test as the test binary of Kubernetes\' e2e suite, for development only', () => {
    const e2e = binaryRecipes.find((r) => r.name === 'e2e.test');
    expect(e2e).toMatchObject({ wrapper: 'kubernetes', package: 'k8s.io/kubernetes/test/e2e', testBinary: true, shipped: false });
    expect(binaryRecipes.filter((r) => r.testBinary).map((r) => r.name)).toEqual(['e2e.test']);
  });

  it('build the six Kubernetes components once, as the multi-call kube that runs each by the name it is called by', () => {
    const kube = binaryRecipes.find((r) => r.name === 'kube');
    expect(kube).toMatchObject({ wrapper: 'kubernetes', package: './cmd/kube', shipped: true, versionPackages: ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'] });
    expect(kube?.links).toEqual(['kube-apiserver', 'kubelet', 'kubeadm', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy']);
    expect(kubeComponents).toEqual(kube?.links);
    // No component is also a binary of its own, and no two recipes answer to the same name.
    const names = binaryRecipes.flatMap((r) => [r.name, ...(r.links ?? [])]);
    expect(new Set(names).size).toBe(names.length);
    expect(binaryRecipes.filter((r) => r.links).map((r) => r.name)).toEqual(['kube']);
  });
});
