# Sourced by the dashboard benchmarks (serve.sh, views.sh, view_updates.sh):
#
#   serve_scratch
#
# makes a scratch directory `dir`, removed when the script exits, after the server `pid` (when
# one was started) is stopped; then
#
#   start_serve HONE REPO LOG
#
# starts `HONE -C REPO serve --port 0` in the background with a fixed bearer token, its output
# in LOG, and waits (up to 20 s) for the address it prints; sets `pid` (to kill at the end),
# `url` and `token`. A server that exits first has its output printed and the script exits.
start_serve() {
  token=bench-token-0123456789abcdef
  # Emptied here, not by the redirection below: that runs in the child, after the first look
  # for the address, which could read the last server's.
  : >"$3"
  HONE_TOKEN=$token "$1" -C "$2" serve --port 0 >"$3" 2>&1 &
  pid=$!
  for _ in $(seq 400); do
    grep -q 'http://' "$3" && break
    kill -0 "$pid" 2>/dev/null || { cat "$3"; exit 1; }
    sleep 0.05
  done
  url=$(grep -m1 -o 'http://[^ ]*' "$3")
}

serve_scratch() {
  dir=$(mktemp -d)
  pid=
  trap serve_cleanup EXIT
}

serve_cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
