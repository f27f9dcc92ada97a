//! `hone log`: one row per experiment, as a table, JSON lines or autoresearch's results.tsv,
//! streamed from the store.

use std::io::Write;
use std::ops::ControlFlow;

use clap::Args;
use hone::propose::optimizer::RunNarrowings;
use hone::store::{RunRecord, Store};

use super::Here;
use crate::error::{CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct LogArgs {
    /// The run's tag (default: the latest run).
    #[arg(long)]
    run: Option<String>,
    /// JSON lines, one object per experiment.
    #[arg(long, conflicts_with = "tsv")]
    json: bool,
    /// autoresearch's results.tsv layout: commit, metric, status, description.
    #[arg(long)]
    tsv: bool,
}

/// Prints the rows as the store reads them, a page at a time: the first comes at once, memory
/// does not grow with the run, no read transaction stays open while the output blocks (a
/// pager), and reading stops when the output's reader goes away. Only the table needs to
/// know beforehand which columns it has (the run's tallies).
pub fn run(here: &Here, a: LogArgs) -> CliResult {
    let (store, run) = here.open_run(a.run.as_deref())?;
    let (holdout, paid) = if a.json || a.tsv {
        (false, false)
    } else {
        let (holdout, cost) = store.run_columns(run.id).runtime()?;
        // A free model's tokens are worth their column too.
        (holdout, cost || store.tokens_spent(run.id).runtime()? > 0)
    };
    let format = output::LogFormat::new(a.json, a.tsv, holdout, paid);
    // The table says where crashes narrowed a knob's explored range, worked out from the
    // rows as they stream (each narrowing depends only on the experiments up to it), only
    // for a run that has failures of the kinds that narrow.
    let mut narrowed =
        (!a.json && !a.tsv && super::has_infeasible(&store, run.id)?).then(RunNarrowings::default);
    // Buffered: a line per write would be a system call per experiment.
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let stopped = match write_log(&store, &run, &format, narrowed.as_mut(), &mut w)? {
        (_, Some(e)) => Some(e),
        (_, None) => std::io::Write::flush(&mut w).err(),
    };
    match stopped {
        // The reader went away (`hone log | head`, a pager quit): nothing more to do.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Some(e) => Err(
            crate::error::CliError::runtime(format!("cannot write the log: {e}"))
                .hint("check the disk or the pipe `hone log` writes to"),
        ),
        None => Ok(()),
    }
}

/// Writes the header and then each row as the store reads it, with the narrowings that
/// appeared after it (`narrowed`, for a table); at the first write that fails (a closed pipe)
/// it stops reading. How many rows it read, and the error that stopped it.
fn write_log(
    store: &Store,
    run: &RunRecord,
    format: &output::LogFormat,
    mut narrowed: Option<&mut RunNarrowings>,
    w: &mut dyn Write,
) -> CliResult<(u64, Option<std::io::Error>)> {
    if let Err(e) = output::log_header(w, run, format) {
        return Ok((0, Some(e)));
    }
    let mut read = 0;
    let mut failed = None;
    store
        .for_each_experiment(run.id, &mut |e| {
            read += 1;
            let here: Vec<_> = match narrowed.as_deref_mut() {
                Some(h) => h.next(&e).into_iter().map(|x| (e.n, x)).collect(),
                None => Vec::new(),
            };
            let written =
                output::log_row(w, &e, format).and_then(|()| output::log_narrowings(w, e.n, &here));
            Ok(match written {
                Ok(()) => ControlFlow::Continue(()),
                Err(err) => {
                    failed = Some(err);
                    ControlFlow::Break(())
                }
            })
        })
        .runtime()?;
    Ok((read, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hone::store::{ExperimentRecord, Status};

    /// A pipe whose reader is gone.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A pipe whose reader goes away after this many lines.
    struct ClosesAfterLines(usize);

    impl Write for ClosesAfterLines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            self.0 = self
                .0
                .saturating_sub(b.iter().filter(|c| **c == b'\n').count());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_stops_the_reading() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("hone.db")).unwrap();
        let run = store.create_plain_run("t", "abc", "m").unwrap();
        let rows = hone::store::STREAM_PAGE * 3;
        store
            .in_transaction(|s| {
                for n in 0..rows {
                    let e = ExperimentRecord {
                        n,
                        parent_commit: "abc".into(),
                        status: Some(Status::Discard),
                        ..Default::default()
                    };
                    s.put_experiment(run.id, &e)?;
                }
                Ok(())
            })
            .unwrap();
        let table = output::LogFormat::new(false, false, false, false);
        let (read, err) = write_log(&store, &run, &table, None, &mut Vec::new()).unwrap();
        assert_eq!((read, err.is_none()), (rows, true));
        let (read, err) = write_log(&store, &run, &table, None, &mut Closed).unwrap();
        assert_eq!(read, 0, "the header's write failed: no row read");
        assert_eq!(err.map(|e| e.kind()), Some(std::io::ErrorKind::BrokenPipe));
        let json = output::LogFormat::new(true, false, false, false);
        let mut w = ClosesAfterLines(0);
        let (read, err) = write_log(&store, &run, &json, None, &mut w).unwrap();
        assert_eq!(
            read, 1,
            "stopped at the first row that could not be written"
        );
        assert!(err.is_some());
        let mut w = ClosesAfterLines(1);
        let (read, _) = write_log(&store, &run, &table, None, &mut w).unwrap();
        assert_eq!(read, 1);
    }
}
