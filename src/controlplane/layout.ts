/**
 * Where a local control plane keeps its state inside an install directory. Everything
 * it needs to come back after a crash, a kill or a reboot is here: etcd's data (fsync
 * on), the PKI, the ports it last used, one log per process and the pidfiles.
 */
import path from 'node:path';
import { controlPlaneStateDir } from '../installdir/paths.js';

export interface ControlPlaneLayout {
  /** The install directory. */
  dir: string;
  /** `<dir>/.provisioner/controlplane`. */
  stateDir: string;
  pkiDir: string;
  etcdDataDir: string;
  logDir: string;
  /** Ports of the last start, reused when still free so endpoints stay stable. */
  portsFile: string;
  /** Written when a start has finished (CRDs, controllers, webhooks); removed when a start begins. */
  startedFile: string;
  /**
   * The extra address the API server is reachable on for hosts, `{address, port}`, written once
   * its forwarder is ready; absent when the control plane listens on loopback only.
   */
  listenFile: string;
  /**
   * Node artifacts (kubelet, kubeadm, image archives) served read-only over HTTP by the
   * forwarder on the listen address; filled by whoever prepares nodes (nodeartifacts/node-images.ts).
   */
  artifactsDir: string;
  /** Admin kubeconfig of the local control plane, 0600: `<dir>/auth/management.kubeconfig`. */
  kubeconfig: string;
}

export function controlPlaneLayout(dir: string): ControlPlaneLayout {
  const root = path.resolve(dir);
  const stateDir = controlPlaneStateDir(root);
  return {
    dir: root,
    stateDir,
    pkiDir: path.join(stateDir, 'pki'),
    etcdDataDir: path.join(stateDir, 'etcd'),
    logDir: path.join(root, 'logs'),
    portsFile: path.join(stateDir, 'ports.json'),
    startedFile: path.join(stateDir, 'started.json'),
    listenFile: path.join(stateDir, 'listen.json'),
    artifactsDir: path.join(stateDir, 'artifacts'),
    kubeconfig: path.join(root, 'auth', 'management.kubeconfig'),
  };
}
