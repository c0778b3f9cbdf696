import { describe, expect, it } from 'vitest';
import { platformNamed, platformNames, sharedControllers } from '../platforms/index.js';
import { managementControllers } from './management.js';

describe('managementControllers', () => {
  it("runs a platform's own controllers and the shared ones, each provider once", () => {
    for (const name of platformNames()) {
      const providers = managementControllers(name).map((c) => c.provider);
      const expected = new Set([...platformNamed(name).controllers, ...sharedControllers()].map((c) => c.provider));
      expect(new Set(providers), name).toEqual(expected);
      expect(providers, name).toHaveLength(expected.size);
    }
  });

  it('leaves out the infrastructure providers of every other platform', () => {
    const hosts = new Set(managementControllers('hosts').map((c) => c.provider));
    const others = platformNames().filter((n) => n !== 'hosts').flatMap((n) => platformNamed(n).controllers.map((c) => c.provider));
    const foreign = others.filter((p) => !hosts.has(p) && p.startsWith('infrastructure-'));
    expect(foreign.length).toBeGreaterThan(0);
    for (const provider of foreign) expect(hosts.has(provider), provider).toBe(false);
  });

  it('refuses an unknown platform, naming the choices', () => {
    expect(() => managementControllers('nowhere')).toThrow(/unknown platform "nowhere"/);
  });
});
