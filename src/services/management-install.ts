/**
 * `management install`: Cluster API's providers and the agent manager as pods in a cluster
 * (src/management/install.ts does the work; `pivot --to self` installs them the same way).
 */
export { describePlan, installManagement, type ManagementInstallRequest, type ManagementInstallResult } from '../management/install.js';
