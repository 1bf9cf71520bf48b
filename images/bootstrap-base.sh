#!/usr/bin/env bash
# Bootstrap a minimal Debian base image into the local Docker daemon, for sites and CI
# machines that have no container registry (nothing can be pulled).
#
#   images/bootstrap-base.sh [--force] [TAG]
#
# Builds a debootstrap --variant=minbase root filesystem with what an envmgr Python
# environment build needs (python3, python3-venv, python3-pip, ca-certificates) and imports
# it with `docker import` as TAG (default envmgr/base:<suite>, i.e. envmgr/base:bookworm).
# Idempotent: if TAG already exists it says so and exits 0 at once (--force rebuilds).
#
# Environment (all optional):
#   ENVMGR_BASE_IMAGE      image tag to build (the TAG argument wins over it)
#   ENVMGR_DEBIAN_MIRROR   Debian mirror URL; default: the first `deb` URI that this machine's
#                          apt sources give for <suite> with component main
#   ENVMGR_DEBIAN_SUITE    Debian suite; default: VERSION_CODENAME from /etc/os-release
#   ENVMGR_DEBIAN_KEYRING  keyring debootstrap checks the Release file with; default: the
#                          source's Signed-By file, else debootstrap's own default
#   ENVMGR_BASE_PACKAGES   comma-separated extra packages to include
#   ENVMGR_BASE_REBUILD=1  same as --force
#   TMPDIR                 where the temporary root filesystem is built (default /var/tmp)
#
# Needs root (debootstrap), a reachable Docker daemon and the docker CLI. No mirror host
# name is written here on purpose: the mirror always comes from the machine's apt config.
set -euo pipefail

PROG=${0##*/}
START=$SECONDS
log() { printf '[%s +%3ds] %s\n' "$PROG" "$((SECONDS - START))" "$*"; }
die() { printf '[%s] error: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

FORCE=${ENVMGR_BASE_REBUILD:-0}
TAG_ARG=
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    -f|--force) FORCE=1 ;;
    -*) die "unknown option: $1 (see --help)" ;;
    *) [ -z "$TAG_ARG" ] || die "only one TAG argument allowed"; TAG_ARG=$1 ;;
  esac
  shift
done

host_codename() {
  # shellcheck disable=SC1091
  ( . /etc/os-release 2>/dev/null && printf '%s' "${VERSION_CODENAME:-}" ) || true
}
SUITE=${ENVMGR_DEBIAN_SUITE:-$(host_codename)}
SUITE=${SUITE:-bookworm}
TAG=${TAG_ARG:-${ENVMGR_BASE_IMAGE:-envmgr/base:$SUITE}}

command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed"

# --- fast path: already there -------------------------------------------------------------
image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null; }
if [ "$FORCE" != 1 ] && id=$(image_id "$TAG"); then
  log "image $TAG already exists ($id); nothing to do (use --force to rebuild)"
  exit 0
fi

docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (is dockerd running, may this user use it?)"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root: run as root (e.g. sudo -E $0)"

# One bootstrap at a time per machine; a second caller waits, then finds the image.
LOCK=${ENVMGR_BOOTSTRAP_LOCK:-/var/lock/envmgr-bootstrap-base.lock}
exec 9>"$LOCK"
if ! flock -n 9; then
  log "another bootstrap is running; waiting for its lock ($LOCK)"
  flock 9
fi
if [ "$FORCE" != 1 ] && id=$(image_id "$TAG"); then
  log "image $TAG was built by the other run ($id); nothing to do"
  exit 0
fi

# --- mirror from the apt configuration ----------------------------------------------------
# Prints "URI<TAB>SIGNED_BY" for every `deb` source of suite $1 with component main, in the
# order apt reads them: sources.list, then sources.list.d/*.list and *.sources by name.
apt_sources_for_suite() {
  local suite=$1 f SRC_LIST=/etc/apt/sources.list SRC_PARTS=/etc/apt/sources.list.d/
  local files=()
  # Where apt itself looks (honours APT_CONFIG / Dir::Etc), with the usual defaults.
  if command -v apt-config >/dev/null 2>&1; then
    eval "$(apt-config shell SRC_LIST Dir::Etc::sourcelist/f SRC_PARTS Dir::Etc::sourceparts/d 2>/dev/null)"
  fi
  [ -f "$SRC_LIST" ] && files+=("$SRC_LIST")
  for f in "${SRC_PARTS%/}"/*; do
    case $f in *.list|*.sources) [ -f "$f" ] && files+=("$f") ;; esac
  done
  for f in "${files[@]}"; do
    case $f in
      *.sources)
        # deb822: stanzas split by blank lines; "Field: value"; continuation lines start
        # with whitespace; '#' lines are comments; field names are case-insensitive.
        awk -v suite="$suite" '
          function flush(   t, s, c, u, nt, ns, nc, nu, i, okt, oks, okc) {
            if (!("uris" in F)) { delete F; return }
            if (tolower(F["enabled"]) == "no") { delete F; return }
            nt = split(F["types"], t, /[ \t]+/); ns = split(F["suites"], s, /[ \t]+/)
            nc = split(F["components"], c, /[ \t]+/); nu = split(F["uris"], u, /[ \t]+/)
            okt = oks = okc = 0
            for (i = 1; i <= nt; i++) if (t[i] == "deb") okt = 1
            for (i = 1; i <= ns; i++) if (s[i] == suite) oks = 1
            for (i = 1; i <= nc; i++) if (c[i] == "main") okc = 1
            if (okt && oks && okc)
              for (i = 1; i <= nu; i++) if (u[i] != "") print u[i] "\t" F["signed-by"]
            delete F
          }
          /^#/ { next }
          /^[ \t]*$/ { flush(); key = ""; next }
          /^[ \t]/ { if (key != "") { v = $0; sub(/^[ \t]+/, "", v); F[key] = F[key] " " v }; next }
          {
            i = index($0, ":"); if (i == 0) next
            key = tolower(substr($0, 1, i - 1)); v = substr($0, i + 1)
            sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v); F[key] = v
          }
          END { flush() }' "$f"
        ;;
      *)
        # one-line: deb [ opt=val ... ] URI SUITE COMPONENT...
        awk -v suite="$suite" '
          { sub(/#.*/, "") }
          $1 != "deb" { next }
          {
            line = $0; sb = ""
            if (match(line, /\[[^]]*\]/)) {
              opts = substr(line, RSTART + 1, RLENGTH - 2)
              line = substr(line, 1, RSTART - 1) " " substr(line, RSTART + RLENGTH)
              n = split(opts, o, /[ \t]+/)
              for (i = 1; i <= n; i++) if (o[i] ~ /^signed-by=/) { sb = o[i]; sub(/^signed-by=/, "", sb) }
            }
            n = split(line, w, /[ \t]+/); k = 0
            for (i = 1; i <= n; i++) if (w[i] != "") p[++k] = w[i]
            if (k < 4 || p[3] != suite) next
            for (i = 4; i <= k; i++) if (p[i] == "main") { print p[2] "\t" sb; next }
          }' "$f"
        ;;
    esac
  done
}

MIRROR=${ENVMGR_DEBIAN_MIRROR:-}
KEYRING=${ENVMGR_DEBIAN_KEYRING:-}
if [ -n "$MIRROR" ]; then
  log "mirror: $MIRROR (from ENVMGR_DEBIAN_MIRROR)"
else
  while IFS=$'\t' read -r uri signed_by; do
    case $uri in
      http://*|https://*|file:/*) ;;
      *) continue ;;   # mirror+file:, cdrom:, tor+http: ... are apt-only transports
    esac
    MIRROR=$uri
    if [ -z "$KEYRING" ] && [ -n "$signed_by" ] && [ -f "$signed_by" ]; then KEYRING=$signed_by; fi
    break
  done < <(apt_sources_for_suite "$SUITE")
  [ -n "$MIRROR" ] || die "no 'deb' source for suite '$SUITE' with component main in apt's sources.list{,.d/*.list,.d/*.sources}; set ENVMGR_DEBIAN_MIRROR"
  log "mirror: $MIRROR (from this machine's apt sources, suite $SUITE, component main)"
fi

# debootstrap fetches with wget, which ignores apt's proxy setting: carry it over.
if command -v apt-config >/dev/null 2>&1; then
  for scheme in http https; do
    var=${scheme}_proxy
    if [ -z "${!var:-}" ]; then
      p=$(apt-config shell P "Acquire::$scheme::Proxy" 2>/dev/null | sed -n "s/^P='\(.*\)'$/\1/p")
      if [ -n "$p" ] && [ "$p" != DIRECT ]; then export "$var=$p"; log "using apt's $scheme proxy"; fi
    fi
  done
fi

# --- debootstrap on the host --------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
missing=()
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ -n "$KEYRING" ] || [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} with apt-get (apt-get update first)"
  out=$( { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } 2>&1 ) ||
    { printf '%s\n' "$out" >&2; die "apt-get could not install ${missing[*]}"; }
fi
log "debootstrap $(dpkg-query -W -f '${Version}' debootstrap 2>/dev/null || echo '?')"

# --- build the root filesystem ------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/envmgr-base.XXXXXX")
ROOTFS=$WORK/rootfs
DBS_PID=
MON_PID=
cleanup() {
  local rc=$? m i
  # an interrupted run: stop debootstrap (its own process group) before touching its target
  if [ -n "$DBS_PID" ] && kill -0 "$DBS_PID" 2>/dev/null; then
    kill -TERM -- "-$DBS_PID" 2>/dev/null || kill -TERM "$DBS_PID" 2>/dev/null || true
    for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$DBS_PID" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$DBS_PID" 2>/dev/null || true
  fi
  [ -z "$MON_PID" ] || kill "$MON_PID" 2>/dev/null || true
  # debootstrap mounts proc/sys/dev inside the target; a failed run can leave them mounted,
  # and rm -rf must never walk into the host's /proc or /dev.
  if [ -d "$ROOTFS" ]; then
    while read -r m; do umount -l "$m" 2>/dev/null || true
    done < <(awk -v r="$ROOTFS" 'index($2, r) == 1 { print $2 }' /proc/self/mounts | sort -r)
  fi
  rm -rf --one-file-system "$WORK"
  [ "$rc" -eq 0 ] || printf '[%s] failed (exit %d) after %ds\n' "$PROG" "$rc" "$((SECONDS - START))" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PACKAGES=python3,python3-venv,python3-pip,ca-certificates
[ -z "${ENVMGR_BASE_PACKAGES:-}" ] || PACKAGES=$PACKAGES,$ENVMGR_BASE_PACKAGES
ARCH=$(dpkg --print-architecture)

args=(--variant=minbase --arch="$ARCH" --components=main --include="$PACKAGES")
[ -z "$KEYRING" ] || args+=(--keyring="$KEYRING")
log "debootstrap $SUITE ($ARCH, minbase + $PACKAGES) into $ROOTFS; this takes minutes"
# In the background, in its own process group, so that a signal to this script runs the
# cleanup at once (bash defers traps while a foreground child runs) and can stop all of it.
setsid debootstrap "${args[@]}" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 &
DBS_PID=$!
# progress: debootstrap's stage lines, not its hundreds of per-package lines
tail -n +1 -F --pid="$DBS_PID" "$WORK/debootstrap.log" 2>/dev/null |
  awk -v p="[$PROG]" '/^I: (Retrieving (InRelease|Release|Packages)|Valid Release|Resolving|Found additional|Checking component|Installing core|Unpacking required|Configuring required|Unpacking the base|Configuring the base|Base system)/ { print p "   debootstrap " $0; fflush() }' &
MON_PID=$!
dbs_rc=0
wait "$DBS_PID" || dbs_rc=$?
DBS_PID=
wait "$MON_PID" 2>/dev/null || true
MON_PID=
if [ "$dbs_rc" -ne 0 ]; then
  tail -n 40 "$WORK/debootstrap.log" >&2
  [ ! -f "$ROOTFS/debootstrap/debootstrap.log" ] || tail -n 40 "$ROOTFS/debootstrap/debootstrap.log" >&2
  die "debootstrap failed"
fi
log "debootstrap done: $(grep -c '^I: Configuring' "$WORK/debootstrap.log" || true) packages configured"

log "trimming the root filesystem (apt caches and lists, docs, man pages, translations)"
rm -rf "${ROOTFS:?}"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin \
       "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log "$ROOTFS"/debootstrap
mkdir -p "$ROOTFS"/var/lib/apt/lists/partial
# Like Debian's -slim images: dpkg keeps them out of packages installed later, and the ones
# debootstrap already unpacked go now (copyright files stay).
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/envmgr-slim" <<'EOF'
# envmgr base image: no documentation, man pages or translations
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
find "$ROOTFS/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete
for d in man groff info lintian locale; do
  [ ! -d "$ROOTFS/usr/share/$d" ] || find "$ROOTFS/usr/share/$d" -mindepth 1 ! -name locale.alias -delete
done
# Docker bind-mounts its own at run time; never ship the build host's.
: >"$ROOTFS/etc/resolv.conf"
: >"$ROOTFS/etc/hostname"
log "root filesystem: $(du -sh --one-file-system "$ROOTFS" | cut -f1)"

# --- import -------------------------------------------------------------------------------
log "importing into docker as $TAG"
OLD_ID=$(image_id "$TAG" || true)
PY=$(chroot "$ROOTFS" python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
tar --numeric-owner --xattrs -C "$ROOTFS" --exclude='./dev/*' --exclude='./proc/*' \
    --exclude='./sys/*' -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL org.opencontainers.image.title=envmgr-base org.opencontainers.image.base.name=debian:$SUITE io.envmgr.base.suite=$SUITE io.envmgr.base.python=$PY io.envmgr.base.packages=$PACKAGES" \
    --message "envmgr images/bootstrap-base.sh: debootstrap minbase $SUITE + $PACKAGES" \
    - "$TAG" >/dev/null

log "smoke test: python3 -m venv inside a container"
docker run --rm --network none "$TAG" sh -c \
  'python3 -m venv /tmp/v && /tmp/v/bin/pip --version >/dev/null && python3 -c "import venv, ensurepip, ssl"' ||
  die "smoke test failed: $TAG cannot create a venv (image left in place for inspection)"

NEW_ID=$(image_id "$TAG")
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$NEW_ID" ]; then
  # --force: drop the image this one replaced unless something still uses it
  if docker image rm "$OLD_ID" >/dev/null 2>&1; then log "removed the replaced image $OLD_ID"
  else log "kept the replaced image $OLD_ID (in use or tagged elsewhere)"; fi
fi
size=$(docker image inspect --format '{{.Size}}' "$TAG")
log "done: $TAG ($(image_id "$TAG"), python $PY, $((size / 1000000)) MB) in $((SECONDS - START))s"
