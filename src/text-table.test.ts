import { describe, expect, it } from 'vitest';
import { formatTable } from './text-table.js';

describe('formatTable', () => {
  it('pads each column to its widest cell, leaves the last unpadded and no line ending in spaces', () => {
    expect(formatTable(['NAME', 'STATE', 'NOTE'], [['etcd', 'running', 'ok'], ['kube-apiserver', 'stopped', '']])).toEqual([
      'NAME            STATE    NOTE',
      'etcd            running  ok',
      'kube-apiserver  stopped',
    ]);
  });

  it('pads the cells alignRight picks on the left', () => {
    expect(formatTable(['BINARY', 'SIZE', 'CACHE'], [['etcd', '21.3', 'extracted'], ['kubectl', '5.1', 'absent']], { alignRight: (_, column) => column === 1 })).toEqual([
      'BINARY   SIZE  CACHE',
      'etcd     21.3  extracted',
      'kubectl   5.1  absent',
    ]);
  });
});
