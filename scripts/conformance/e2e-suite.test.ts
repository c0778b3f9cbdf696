import { describe, expect, it } from 'vitest';
import { focusOf, missingImages, parseReport, summarize } from './e2e-suite.js';

const report = JSON.stringify([{
  SpecReports: [
    { LeafNodeType: 'BeforeSuite', State: 'passed', RunTime: 1e9 },
    { ContainerHierarchyTexts: ['[sig-network] Services'], LeafNodeText: 'should serve a basic endpoint from pods [Conformance]', LeafNodeType: 'It', State: 'passed', RunTime: 12.5e9 },
    { ContainerHierarchyTexts: ['[sig-network] DNS'], LeafNodeText: 'should provide DNS for the cluster [Conformance]', LeafNodeType: 'It', State: 'failed', RunTime: 300e9,
      Failure: { Message: 'Timed out after 300s.\npod did not start' }, CapturedGinkgoWriterOutput: 'Failed to pull image "provisioner.local/glibc-dns-testing:2.0.0": not found\nBack-off pulling image \\"provisioner.local/glibc-dns-testing:2.0.0\\"\nContainer image "provisioner.local/coredns:v1.14.2" already present on machine\nprovisioner.local/agnhost:2.63.0 ran' },
    { ContainerHierarchyTexts: ['[sig-apps] Deployment'], LeafNodeText: 'deployment should support rollover [Conformance]', LeafNodeType: 'It', State: 'skipped' },
    { LeafNodeType: 'AfterSuite', State: 'failed', RunTime: 2e9, Failure: { Message: 'cleanup failed' } },
  ],
}]);

describe('e2e suite', () => {
  it('reads the It specs of ginkgo\'s JSON report with their full names, states and times', () => {
    const specs = parseReport(report);
    expect(specs.map((s) => [s.name, s.state, s.seconds])).toEqual([
      ['[sig-network] Services should serve a basic endpoint from pods [Conformance]', 'passed', 12.5],
      ['[sig-network] DNS should provide DNS for the cluster [Conformance]', 'failed', 300],
      ['[sig-apps] Deployment deployment should support rollover [Conformance]', 'skipped', 0],
      ['[AfterSuite]', 'failed', 2],
    ]);
    expect(specs[0]!.failure).toBeUndefined();
    expect(specs[1]!.failure).toBe('Timed out after 300s.\npod did not start');
    expect(summarize(specs, 320)).toMatch(/e2e\.test: 1 passed, 2 failed of 3 run, in 320s$/);
  });

  it('names the images a failed spec wanted that we do not build', () => {
    const [passed, failed] = parseReport(report);
    expect(missingImages(failed!)).toEqual(['provisioner.local/glibc-dns-testing:2.0.0']);
    expect(missingImages(passed!)).toEqual([]);
  });

  it('focuses exactly the named specs: brackets, dots and colons taken literally', () => {
    const names = ['[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]', '[sig-apps] Deployment RollingUpdateDeployment should delete old pods and create new ones [Conformance]'];
    const focus = new RegExp(focusOf(names));
    for (const name of names) expect(focus.test(name)).toBe(true);
    expect(focus.test('[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: udp [NodeConformance] [Conformance]')).toBe(false);
    expect(focus.test(`x${names[1]}`)).toBe(false);
    expect(focus.test(` ${names[1]}`)).toBe(true); // ginkgo's full text starts with a space
  });
});
