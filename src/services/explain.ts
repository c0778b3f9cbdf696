/** `provisioner explain install-config[.field]`: the schema's documentation at the terminal. */
import { lookupField, renderExplain, splitExplainPath } from '../config/index.js';
import { UsageError } from '../errors.js';
import type { EventSink } from '../events.js';
import { installConfigSchema } from '../platforms/index.js';

/** Documents that explain knows, by the names a user may type. */
const resources: Record<string, string> = { 'install-config': 'install-config', installconfig: 'install-config' };

export interface ExplainOptions {
  /** `install-config` or `install-config.<field>[.<field>...]`. */
  target: string;
  /** Print nested fields too. Default: false. */
  recursive: boolean;
  sink: EventSink;
}

export function explain(options: ExplainOptions): string {
  const [resourceName = '', ...rest] = splitExplainPath(options.target);
  const resource = resources[resourceName.toLowerCase()];
  if (!resource) {
    throw new UsageError(`cannot explain ${JSON.stringify(resourceName)}`, { hint: 'explain install-config, or one of its fields: install-config.machinePools.roles' });
  }
  const found = lookupField(installConfigSchema.root, rest);
  if (!found.ok) {
    const where = found.at ? `${resource}.${found.at}` : resource;
    throw new UsageError(`${where} has no field ${JSON.stringify(found.unknown)}`, {
      hint: found.suggestion
        ? `did you mean ${where}.${found.suggestion}?`
        : found.candidates.length
          ? `its fields: ${found.candidates.join(', ')}`
          : `${where} has no sub-fields`,
    });
  }
  const text = renderExplain(found.target, { rootName: resource, recursive: options.recursive });
  options.sink.emit({ type: 'result', kind: 'explain', text, data: { path: found.target.path ? `${resource}.${found.target.path}` : resource } });
  return text;
}
