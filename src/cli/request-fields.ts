/**
 * The one mapping from a service request's field to the flag that sets it: services name a
 * field (`requestField` in src/errors.ts) and know no flag names; a failure, and the events a
 * command prints, show the flag the user typed instead.
 */
import { ProvisionerError, nameRequestFields } from '../errors.js';
import type { EventSink } from '../events.js';

/** Request field → flag. A field that is not here is shown by its name. */
export const flagOfRequestField: Readonly<Record<string, string>> = {
  listenAddress: '--listen-address',
  platform: '--platform',
  managementKubeconfig: '--management-kubeconfig',
  pivotTo: '--pivot-to',
  registerRancher: '--register-rancher',
  rancherKubeconfig: '--kubeconfig',
  toKubeconfig: '--to-kubeconfig',
  to: '--to',
  apiServerUrl: '--api-server-url',
  mode: '--mode',
  imageRegistry: '--image-registry',
  imageRegistryAuthFile: '--image-registry-auth-file',
  imageRegistryCaFile: '--image-registry-ca-file',
};

export function flagOf(field: string): string {
  return flagOfRequestField[field] ?? field;
}

/** The error with every request field it names written as its flag (the same error, for its class and exit code). */
export function withFlagNames(error: unknown): unknown {
  if (error instanceof ProvisionerError) error.nameRequestFields(flagOf);
  else if (error instanceof Error) error.message = nameRequestFields(error.message, flagOf);
  return error;
}

/** A sink that writes flags for request fields in the messages of the events it passes on. */
export function sinkWithFlagNames(sink: EventSink): EventSink {
  return {
    emit: (event) => sink.emit('message' in event && typeof event.message === 'string' ? { ...event, message: nameRequestFields(event.message, flagOf) } : event),
  };
}
