# Sourced by scripts/bench-peers.sh and scripts/bench-peers-embed.sh: llama.cpp's prebuilt CPU
# libraries from the node-llama-cpp npm package (pinned, installed into $PEERS/npm, nothing else is
# downloaded) and its headers from the source bundle shipped in it (unpacked into $PEERS/llama.cpp).
# Needs ROOT, BUILD, PEERS and PEER_SCRIPT (the caller's name in messages); defines die, log,
# ensure_ragd_targets and build_peer_driver; sets NPM_DIR, BINS, SRC, LIBS (the library files to
# link by name: their names carry a version, e.g. libllama.v0.5.0.so) and LLAMA_RELEASE.
NODE_LLAMA_CPP_VERSION=3.22.1
die() { echo "$PEER_SCRIPT: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }
# ensure_ragd_targets TARGET...: builds the ragd targets whose binaries are missing from $BUILD/bin.
ensure_ragd_targets() {
  local t missing=()
  for t in "$@"; do [[ -x "$BUILD/bin/$t" ]] || missing+=("$t"); done
  if ((${#missing[@]})); then
    log "building ${missing[*]}"
    cmake --build "$BUILD" --target "${missing[@]}"
  fi
}
mkdir -p "$PEERS"
NPM_DIR="$PEERS/npm"
BINS="$NPM_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
if ! compgen -G "$BINS/libllama*.so" >/dev/null; then
  # npm (Debian's package) fetches llama.cpp's prebuilt libraries.
  command -v npm >/dev/null || "$ROOT/scripts/apt-install-missing.sh" "$PEER_SCRIPT" npm
  command -v npm >/dev/null || die "npm is not installed and could not be installed (apt-get install npm)"
  log "installing node-llama-cpp $NODE_LLAMA_CPP_VERSION (prebuilt llama.cpp) into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  cat >"$NPM_DIR/package.json" <<EOF
{
  "name": "ragd-bench-peers",
  "private": true,
  "description": "llama.cpp prebuilt CPU libraries for make bench-peers",
  "dependencies": {
    "node-llama-cpp": "$NODE_LLAMA_CPP_VERSION",
    "@node-llama-cpp/linux-x64": "$NODE_LLAMA_CPP_VERSION"
  }
}
EOF
  (cd "$NPM_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
  compgen -G "$BINS/libllama*.so" >/dev/null || die "no libllama*.so under $BINS after npm install"
fi
SRC="$PEERS/llama.cpp"
if [[ ! -f "$SRC/include/llama.h" ]]; then
  BUNDLE="$NPM_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle"
  [[ -f "$BUNDLE" ]] || die "$BUNDLE is missing (node-llama-cpp $NODE_LLAMA_CPP_VERSION ships it)"
  log "unpacking llama.cpp's source bundle for its headers"
  rm -rf "$SRC"
  git clone --quiet "$BUNDLE" "$SRC" 2>/dev/null
fi
# Link against the libraries by file (their names carry a version, e.g. libllama.v0.5.0.so).
LIBS=()
for base in llama ggml ggml-base; do
  f=$(ls "$BINS"/lib$base.so "$BINS"/lib$base.v*.so 2>/dev/null | head -1 || true)
  [[ -n "$f" ]] || die "lib$base*.so not found in $BINS"
  LIBS+=("$f")
done
LLAMA_RELEASE=$(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$NPM_DIR/node_modules/node-llama-cpp/llama/binariesGithubRelease.json" 2>/dev/null || true)
# build_peer_driver NAME: compiles bench/peers/NAME.c (with bench/peers/llama_peer.h) against the
# libraries above into $PEERS/NAME when missing or older than its sources.
build_peer_driver() {
  local out="$PEERS/$1" src="bench/peers/$1.c"
  if [[ ! -x "$out" || "$src" -nt "$out" || bench/peers/llama_peer.h -nt "$out" ]]; then
    log "compiling $src"
    cc -O2 -std=c11 -Wall -Wextra -I bench/peers -I "$SRC/include" -I "$SRC/ggml/include" "$src" \
      -o "$out" "${LIBS[@]}" -Wl,-rpath,"$(cd "$BINS" && pwd)" -ldl -lm
  fi
}
