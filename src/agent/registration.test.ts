import { describe, expect, it } from 'vitest';
import { isLoopbackUrl } from './registration.js';

describe('isLoopbackUrl', () => {
  it('tells a loopback API server (reached only from this machine) from an endpoint hosts reach', () => {
    for (const url of ['https://127.0.0.1:6443', 'https://127.8.0.3:1', 'https://[::1]:6443', 'https://localhost:6443']) expect(isLoopbackUrl(url), url).toBe(true);
    for (const url of ['https://198.19.0.2:6443', 'https://[2001:db8::1]:6443', 'https://api.example.test:6443', 'https://127.example.test']) expect(isLoopbackUrl(url), url).toBe(false);
  });
});
