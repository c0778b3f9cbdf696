import { describe, expect, it } from 'vitest';
import { flannelCniConfigPath, flannelObjects } from './pod-network.js';

interface Container {
  name: string;
  command: string[];
  args: string[];
  volumeMounts: { name: string; mountPath: string }[];
}

const daemonSetOf = (objects: ReturnType<typeof flannelObjects>) =>
  objects.find((o) => o.kind === 'DaemonSet') as unknown as { spec: { template: { spec: { initContainers: Container[]; volumes: { name: string; hostPath?: { path: string } }[] } } } };

describe('flannelObjects', () => {
  const objects = flannelObjects({ podCidr: '198.19.0.0/17', image: 'provisioner.local/flannel:v0.28.10', imagePullPolicy: 'Never' });

  it('installs the plugin and then the CNI config in one init container, each onto the host path it belongs on', () => {
    const pod = daemonSetOf(objects).spec.template.spec;
    expect(pod.initContainers).toHaveLength(1);
    const [install] = pod.initContainers;
    expect(install!.command).toEqual(['/bin/sh', '-c']);
    const steps = install!.args[0]!.split(' && ');
    // The plugin first: the config makes the node Ready, and a Ready node's pods need the plugin.
    expect(steps).toEqual(['cp -f /flannel /opt/cni/bin/flannel', `cp -f /etc/kube-flannel/cni-conf.json ${flannelCniConfigPath}`]);
    const hostPathOf = (mountPath: string) => {
      const mount = install!.volumeMounts.find((m) => m.mountPath === mountPath);
      return pod.volumes.find((v) => v.name === mount?.name)?.hostPath?.path;
    };
    expect(hostPathOf('/opt/cni/bin')).toBe('/opt/cni/bin');
    expect(hostPathOf('/etc/cni/net.d')).toBe('/etc/cni/net.d');
    expect(install!.volumeMounts.find((m) => m.mountPath === '/etc/kube-flannel/')?.name).toBe('flannel-cfg');
  });
});
