import type { Command } from 'commander';
import { dirOption, noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';

interface LoadFlags {
  dir: string;
  noProgressTimeout?: number;
}

export function registerImages(program: Command, run: Runner): void {
  const images = program.command('images').description('container images on the nodes of an install\'s cluster, without a registry');
  images
    .command('load')
    .description('put image archives onto every node of the cluster (checked by digest) and onto nodes that join it later; run again to resume')
    .argument('<archive...>', 'image archives: OCI image layouts or `docker save` tars, uncompressed')
    .addOption(dirOption())
    .addOption(noProgressTimeoutOption())
    .addHelpText(
      'after',
      '\nWhat `kind load image-archive` is for kind, for machines that reach no registry. Pods then\n' +
        'use the image by the name the archive gives it, with imagePullPolicy: Never or IfNotPresent.\n' +
        '\nExamples:\n  docker save -o app.tar registry.example.com/app:v1\n' +
        '  provisioner images load --dir ./demo app.tar\n',
    )
    .action((archives: string[], flags: LoadFlags, command: Command) =>
      run<LoadFlags>(async (options, ctx) => {
        const { loadImages } = await import('../../services/images.js');
        const loaded = await loadImages({
          dir: options.dir,
          archives,
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        ctx.sink.emit({ type: 'result', kind: 'images', text: loaded.map((l) => `${l.refs.join(', ')}  sha256:${l.sha256}`).join('\n'), data: { images: loaded } });
      })(flags, command),
    );
}
