//! The executor backends, listed once. Each line is a backend: its variant of
//! `spec::Backend`, its module in `engine/executor/` (which holds a type of the variant's
//! name with `new(&Spec)` and an `Executor` impl), the name `[exec] backend` gives it, and
//! what it is. The spec (which names and validates `[exec] backend`) and the engine (which
//! declares the modules and picks the executor) both expand their code from this list, so
//! that neither imports the other.
//!
//! A new backend: one file in `engine/executor/`, one line here.

/// Calls the macro `$then` with the list of backends (see the module comment).
#[macro_export]
#[doc(hidden)]
macro_rules! with_backends {
    ($then:ident) => {
        $then! {
            Local = local "local" "Child processes of hone on this machine.",
            Slurm = slurm "slurm" "One SLURM batch job per verification.",
            Workers = workers "workers" "`hone worker` processes on any host, through the PostgreSQL store's queue.",
        }
    };
}
