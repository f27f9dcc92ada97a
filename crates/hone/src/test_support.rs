//! Helpers shared by the library's tests (and, included by path, by the CLI's PostgreSQL
//! tests): running a command that must succeed, and skipping a test whose outside service is
//! missing.

use std::process::Command;

/// Runs `cmd`, which must succeed (the panic names it as `what` and shows its stderr); its
/// standard output.
pub(crate) fn checked_stdout(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a test's outside service is `available`; where it is not, says that the test is
/// skipped (the reason: `missing`), or fails the test when the environment variable `require`
/// is set (as CI does).
pub(crate) fn available_or_skip(available: bool, require: &str, missing: &str) -> bool {
    if !available {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but {missing}"
        );
        eprintln!("skipped: {missing}");
    }
    available
}
