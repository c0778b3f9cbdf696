/**
 * The shell scripts the e2e agnhost image carries as /usr/local/bin/curl and /usr/local/bin/nc
 * (see e2e-images.ts): upstream's agnhost image has Alpine's curl and netcat, and the e2e
 * framework runs both inside agnhost pods; ours has busybox, so these map the invocations the
 * framework uses onto busybox's wget and nc and refuse the rest (exit 2).
 */

/** `curl` for GET requests: -g -q -s, --max-time, --connect-timeout, -o FILE, -w '%{http_code}'. */
export const curlShim = `#!/bin/sh
# curl as Kubernetes' e2e framework runs it in agnhost pods (GET; -g -q -s, --max-time,
# --connect-timeout, -o FILE, -w '%{http_code}'), on busybox's wget: upstream's agnhost image
# carries Alpine's curl, ours only busybox. Anything else is refused (exit 2), never guessed.
out=- maxtime= ctimeout= writecode= url=
while [ $# -gt 0 ]; do
  case "$1" in
    -g|-q|-s|--silent|-k|--insecure) ;;
    -o|--output) out=$2; shift ;;
    -w|--write-out)
      [ "$2" = '%{http_code}' ] || { echo "curl (busybox shim): -w $2 is not supported" >&2; exit 2; }
      writecode=1; shift ;;
    -m|--max-time) maxtime=$2; shift ;;
    --connect-timeout) ctimeout=$2; shift ;;
    -*) echo "curl (busybox shim): $1 is not supported" >&2; exit 2 ;;
    *) url=$1 ;;
  esac
  shift
done
[ -n "$url" ] || { echo "curl (busybox shim): no URL" >&2; exit 2; }
# The limit through busybox's timeout: this wget's own -T crashes (SIGSEGV) in Debian's static build.
limit=\${maxtime:-\${ctimeout:-30}}
if [ -n "$writecode" ]; then
  # curl prints the status even for an error status, 000 when nothing answered, and exits 0 either way.
  # (-S shows the status line; -q would hide it.)
  code=$(/bin/busybox timeout "$limit" /bin/busybox wget -S -O "$out" "$url" 2>&1 | /bin/busybox sed -n 's/^ *HTTP\\/[0-9.]* \\([0-9][0-9][0-9]\\).*/\\1/p' | /bin/busybox tail -n 1)
  printf '%s' "\${code:-000}"
  exit 0
fi
# curl -s prints no error; 7 is its "could not connect".
/bin/busybox timeout "$limit" /bin/busybox wget -q -O "$out" "$url" 2>/dev/null || exit 7
`;

/** `nc` for TCP (-v and -t accepted, -w kept; -u refused: busybox's nc has no UDP), run as busybox's applet `nd` (see e2e-images.ts). */
export const ncShim = `#!/bin/sh
# nc as Kubernetes' e2e framework runs it in agnhost pods for TCP ('echo hostName | nc -v -t -w 2
# HOST PORT'), on busybox's nc, which has no -v or -t (and no UDP: -u is refused, exit 2):
# upstream's agnhost image carries netcat-openbsd, ours only busybox. The image's busybox calls
# its nc applet "nd": its sh runs an applet before anything on PATH, so "nc" would never reach this.
wait=
while [ $# -gt 0 ]; do
  case "$1" in
    -v|-t) ;;
    -w) wait=$2; shift ;;
    -u) echo "nc (busybox shim): UDP is not supported" >&2; exit 2 ;;
    -*) echo "nc (busybox shim): $1 is not supported" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
exec /bin/busybox nd \${wait:+-w "$wait"} "$@"
`;
