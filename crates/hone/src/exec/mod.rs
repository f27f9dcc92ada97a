//! Processes: running a shell command in its own process group under a timeout.
