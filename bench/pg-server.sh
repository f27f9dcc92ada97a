# Sourced by the benchmarks that need PostgreSQL: starts a private server (Debian's postgresql
# package; as root it runs as the postgres user) in "$d/pg" on a free loopback port, with its
# default durability settings, and sets $pgbin and $url. The caller owns "$d" and calls
# stop_pg_server before removing it.
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop_pg_server() {
  if [ -f "$d/pg/postmaster.pid" ]; then kill -QUIT "$(head -1 "$d/pg/postmaster.pid")" 2>/dev/null || true; sleep 1; fi
}
chmod 755 "$d"
mkdir "$d/pg"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$d/pg"
as_pg "$pgbin/initdb" -A trust -U hone -D "$d/pg" > /dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg "$pgbin/postgres" -D "$d/pg" -p "$port" -c listen_addresses=127.0.0.1 -c unix_socket_directories= > "$d/pg.log" 2>&1 &
until "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$port"; do sleep 0.1; done
url="postgres://hone@127.0.0.1:$port/postgres"
