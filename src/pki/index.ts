/** Public surface of the PKI module: CAs, certificates, keys, PEM files, kubeconfigs. */
export * from './certificates.js';
export * from './controlplane-pki.js';
export * from './files.js';
export * from './keys.js';
export * from './kubeconfig.js';
