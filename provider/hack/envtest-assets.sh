#!/bin/sh
# Prints a directory for KUBEBUILDER_ASSETS holding etcd and kube-apiserver from
# provisioner's bundle: they are extracted (sha256-checked) into provisioner's cache by
# dist/embedded/cache.js, then symlinked into provider/bin/envtest. Needs the bundle
# (`npm run bundle`) and dist (`npm run build`). $PROVISIONER_BINARIES_DIR, when set,
# supplies the binaries instead, as it does for the CLI.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
out="$here/bin/envtest"
if [ ! -f "$root/dist/embedded/cache.js" ]; then
  echo "envtest-assets: $root/dist is missing; run \`npm run build\` in $root first" >&2
  exit 1
fi
mkdir -p "$out"
cd "$root"
node --input-type=module -e "
const { ensureBinaries } = await import('$root/dist/embedded/cache.js');
const paths = await ensureBinaries(['etcd', 'kube-apiserver']);
for (const [name, file] of Object.entries(paths)) console.log(name + ' ' + file);
" | while read -r name file; do
  ln -sfn "$file" "$out/$name"
done
for name in etcd kube-apiserver; do
  if [ ! -x "$out/$name" ]; then
    echo "envtest-assets: $out/$name is missing; build the bundle with \`npm run bundle\`" >&2
    exit 1
  fi
done
echo "$out"
