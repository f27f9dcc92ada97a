//! A private PostgreSQL server for tests, shared by the store's unit tests and the CLI's
//! end-to-end tests (which include this file by path: one copy of the start-up, readiness
//! wait and shutdown). Each includer puts `test_support` (crates/hone/src/test_support.rs)
//! beside it.

// Each of the two test builds that include this file uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::test_support::{available_or_skip, checked_stdout};

/// A PostgreSQL server of its own in a temporary directory, on a free loopback port (Debian's
/// postgresql package; .ci/run installs it). Stopped when dropped.
pub(crate) struct PgServer {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    child: std::process::Child,
}

impl PgServer {
    /// Starts one, or returns None (the test is skipped) where PostgreSQL is not installed,
    /// unless HONE_REQUIRE_POSTGRES is set (as .ci/run does).
    pub(crate) fn start() -> Option<PgServer> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path().join("bin")).max())
            .filter(|b| b.join("postgres").exists());
        if !available_or_skip(
            bin.is_some(),
            "HONE_REQUIRE_POSTGRES",
            "PostgreSQL is not installed (apt-get install postgresql)",
        ) {
            return None;
        }
        let bin = bin?;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        // PostgreSQL refuses to run as root: as root, run it as the postgres user.
        let root = unsafe { libc::geteuid() } == 0;
        initdb(&bin, tmp.path(), &data, root);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = as_pg(root, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "unix_socket_directories=", "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = PgServer {
            _tmp: tmp,
            data,
            bin,
            port,
            child,
        };
        server.wait_until_ready();
        Some(server)
    }

    /// Waits (a minute at most) until the server accepts connections.
    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .unwrap();
            if ready.success() {
                break;
            }
            assert!(Instant::now() < deadline, "PostgreSQL did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The URL of database `db` on this server (`postgres` is there from the start).
    pub(crate) fn url(&self, db: &str) -> String {
        format!("postgres://hone@127.0.0.1:{}/{db}", self.port)
    }

    /// A new, empty database on this server; its URL.
    pub(crate) fn database(&self, name: &str) -> String {
        self.psql(&self.url("postgres"), &format!("CREATE DATABASE {name}"));
        self.url(name)
    }

    /// Runs `sql` on the `postgres` database; its output, as [`PgServer::psql`] gives it.
    pub(crate) fn sql(&self, sql: &str) -> String {
        self.psql(&self.url("postgres"), sql)
    }

    /// Runs `sql` on the database at `url`; its output, unaligned and without headers.
    pub(crate) fn psql(&self, url: &str, sql: &str) -> String {
        checked_stdout(
            Command::new(self.bin.join("psql")).args(["-X", "-A", "-t", "-d", url, "-c", sql]),
            "psql",
        )
        .trim()
        .to_string()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        {
            // SIGQUIT: immediate shutdown.
            unsafe { libc::kill(pid, libc::SIGQUIT) };
        }
        let _ = self.child.wait();
    }
}

/// A command that runs `program` as the postgres user when we are root (PostgreSQL refuses
/// to run as root), as ourselves otherwise; stdin closed.
fn as_pg(root: bool, program: &Path) -> Command {
    let mut c = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    c.stdin(Stdio::null());
    c
}

/// Creates a database cluster in `data` (under the temporary directory `tmp`), owned by the
/// postgres user when we are root.
fn initdb(bin: &Path, tmp: &Path, data: &Path, root: bool) {
    if root {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        let st = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(data)
            .status()
            .unwrap();
        assert!(st.success());
    }
    checked_stdout(
        as_pg(root, &bin.join("initdb"))
            .args(["--no-sync", "-A", "trust", "-U", "hone", "-D"])
            .arg(data),
        "initdb",
    );
}
