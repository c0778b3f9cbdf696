import { describe, expect, it } from 'vitest';
import { durationToMs } from './names.js';

describe('durationToMs', () => {
  it.each([
    ['10m', 600_000],
    ['90s', 90_000],
    ['1h30m', 5_400_000],
    ['1h0m5s', 3_605_000],
    ['250ms', 250],
    ['1.5s', 1_500],
    ['2h', 7_200_000],
    ['500us', 0.5],
    ['1µs', 0.001],
    ['3ns', 0.000003],
  ])('%s is %d ms', (text, ms) => {
    expect(durationToMs(text)).toBeCloseTo(ms, 9);
  });

  it('refuses what is not a Go duration rather than reading it as 0', () => {
    expect(() => durationToMs('10 minutes')).toThrow('is not a duration');
    expect(() => durationToMs('')).toThrow('is not a duration');
  });
});
